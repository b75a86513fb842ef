import CPlugindShims
import Glibc

/// A sound file read whole or written through libsndfile, loaded when `plugind audio apply` runs
/// (Debian's libsndfile1; plugind does not link it): the command's input and output. Samples as
/// 32-bit floats, interleaved by frame.
struct AudioFile {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let sampleRate: Int
    let channels: Int
    /// Interleaved: frame f, channel c at `f * channels + c`.
    let samples: [Float]

    var frames: Int { channels > 0 ? samples.count / channels : 0 }

    /// libsndfile's functions, from the library loaded once.
    private struct Library {
        let open: plugind_sndfile_open_function
        let readFloat: plugind_sndfile_readf_float_function
        let writeFloat: plugind_sndfile_writef_float_function
        let close: plugind_sndfile_close_function
        let error: plugind_sndfile_strerror_function

        static func load() throws(Failure) -> Library {
            guard let handle = dlopen("libsndfile.so.1", RTLD_NOW | RTLD_LOCAL) else {
                throw Failure(
                    description:
                        "cannot load libsndfile.so.1, which reads and writes the sound files (sudo apt install libsndfile1): \(String(cString: dlerror()))"
                )
            }
            func symbol<T>(_ name: String, _ type: T.Type) throws(Failure) -> T {
                guard let address = dlsym(handle, name) else { throw Failure(description: "libsndfile.so.1 has no \(name)") }
                return unsafeBitCast(address, to: type)
            }
            return Library(
                open: try symbol("sf_open", plugind_sndfile_open_function.self),
                readFloat: try symbol("sf_readf_float", plugind_sndfile_readf_float_function.self),
                writeFloat: try symbol("sf_writef_float", plugind_sndfile_writef_float_function.self),
                close: try symbol("sf_close", plugind_sndfile_close_function.self),
                error: try symbol("sf_strerror", plugind_sndfile_strerror_function.self))
        }
    }

    /// Reads `path` whole (any format libsndfile reads), refusing one of no channels or over
    /// `maximumFrames`.
    static func read(_ path: String, maximumFrames: Int = 1 << 31) throws(Failure) -> AudioFile {
        let library = try Library.load()
        var info = plugind_sndfile_info()
        guard let file = library.open(path, PLUGIND_SNDFILE_READ, &info) else {
            throw Failure(description: "cannot read \(path): \(String(cString: library.error(nil)))")
        }
        defer { _ = library.close(file) }
        guard info.channels > 0, info.channels <= 4096, info.samplerate > 0 else {
            throw Failure(description: "\(path) has no channels or no sample rate")
        }
        guard info.frames >= 0, info.frames <= Int64(maximumFrames) / Int64(info.channels) else {
            throw Failure(description: "\(path) holds \(info.frames) frames of \(info.channels) channels; at most \(maximumFrames) samples")
        }
        let channels = Int(info.channels)
        var samples = [Float](repeating: 0, count: Int(info.frames) * channels)
        let read = samples.withUnsafeMutableBufferPointer { buffer -> Int64 in
            guard let base = buffer.baseAddress else { return 0 }
            return library.readFloat(file, base, info.frames)
        }
        guard read == info.frames else { throw Failure(description: "\(path) ended after \(read) of \(info.frames) frames") }
        return AudioFile(sampleRate: Int(info.samplerate), channels: channels, samples: samples)
    }

    /// Writes a WAV of 32-bit floats, replacing `path` only once it is complete: a failure leaves
    /// what was there.
    static func writeWAV(_ path: String, sampleRate: Int, channels: Int, samples: [Float]) throws(Failure) {
        let library = try Library.load()
        var info = plugind_sndfile_info()
        info.samplerate = Int32(clamping: sampleRate)
        info.channels = Int32(clamping: channels)
        info.format = PLUGIND_SNDFILE_FORMAT_WAV | PLUGIND_SNDFILE_FORMAT_FLOAT
        let partial = path + ".partial"
        guard let file = library.open(partial, PLUGIND_SNDFILE_WRITE, &info) else {
            throw Failure(description: "cannot write \(partial): \(String(cString: library.error(nil)))")
        }
        let frames = Int64(channels > 0 ? samples.count / channels : 0)
        let written = samples.withUnsafeBufferPointer { buffer -> Int64 in
            guard let base = buffer.baseAddress else { return 0 }
            return library.writeFloat(file, base, frames)
        }
        let closed = library.close(file)
        guard written == frames, closed == 0, rename(partial, path) == 0 else {
            unlink(partial)
            throw Failure(description: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}
