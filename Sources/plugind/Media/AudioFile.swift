import CSndfile
import Glibc

/// A sound file read whole or written in blocks through libsndfile: the input and output of
/// `plugind audio apply`. Samples as 32-bit floats, interleaved by frame.
struct AudioFile {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let sampleRate: Int
    let channels: Int
    /// Interleaved: frame f, channel c at `f * channels + c`.
    let samples: [Float]

    var frames: Int { channels > 0 ? samples.count / channels : 0 }

    /// Reads `path` whole (any format libsndfile reads), refusing one of no channels or over
    /// `maximumFrames`.
    static func read(_ path: String, maximumFrames: Int = 1 << 31) throws(Failure) -> AudioFile {
        var info = SF_INFO()
        guard let file = sf_open(path, Int32(SFM_READ), &info) else {
            throw Failure(description: "cannot read \(path): \(String(cString: sf_strerror(nil)))")
        }
        defer { sf_close(file) }
        guard info.channels > 0, info.samplerate > 0 else { throw Failure(description: "\(path) has no channels or no sample rate") }
        guard info.frames <= Int64(maximumFrames) else {
            throw Failure(description: "\(path) holds \(info.frames) frames; at most \(maximumFrames)")
        }
        let channels = Int(info.channels)
        var samples = [Float](repeating: 0, count: Int(info.frames) * channels)
        let read = samples.withUnsafeMutableBufferPointer { sf_readf_float(file, $0.baseAddress, info.frames) }
        guard read == info.frames else { throw Failure(description: "\(path) ended after \(read) of \(info.frames) frames") }
        return AudioFile(sampleRate: Int(info.samplerate), channels: channels, samples: samples)
    }

    /// Writes a WAV of 32-bit floats, replacing `path` only once it is complete: a failure leaves
    /// what was there.
    static func writeWAV(_ path: String, sampleRate: Int, channels: Int, samples: [Float]) throws(Failure) {
        var info = SF_INFO()
        info.samplerate = Int32(clamping: sampleRate)
        info.channels = Int32(clamping: channels)
        info.format = Int32(SF_FORMAT_WAV | SF_FORMAT_FLOAT)
        let partial = path + ".partial"
        guard let file = sf_open(partial, Int32(SFM_WRITE), &info) else {
            throw Failure(description: "cannot write \(partial): \(String(cString: sf_strerror(nil)))")
        }
        let frames = Int64(channels > 0 ? samples.count / channels : 0)
        let written = samples.withUnsafeBufferPointer { sf_writef_float(file, $0.baseAddress, frames) }
        let closed = sf_close(file)
        guard written == frames, closed == 0, rename(partial, path) == 0 else {
            unlink(partial)
            throw Failure(description: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}
