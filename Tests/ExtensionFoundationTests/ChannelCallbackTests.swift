import ExtensionFoundation
import PlugindEngine
import PlugindSystem
import PlugindWire
import TestSupport
import Testing

/// The library calls a typed call's callback: the channel's state machine, over an in-memory
/// transport, runs the caller's handler only while the call is waited for, answers like an ask,
/// and ends the handlers with their call.
@Suite("Channel protocol: callbacks of typed calls", .tags(.unit))
struct ChannelCallbackTests {
    @Test("a callback of a running call runs its handler; the answer goes back as an ask's; the call then completes")
    func answered() throws {
        var conversation = Conversation()
        try conversation.ready()
        let call = try conversation.call()
        #expect(try conversation.sentToWorker() == [.call(id: call, function: 0, arguments: [])])
        try conversation.worker(.callback(id: 1, call: call, parameter: 3, arguments: [.bytes([1, 0, 0, 0]), .int32(2)]))
        #expect(conversation.callbackHandlers[1]?.call == call)
        #expect(conversation.callbackHandlers[1]?.parameter == 3)
        #expect(conversation.callbackHandlers[1]?.arguments == [.bytes([1, 0, 0, 0]), .int32(2)])
        conversation.apply(conversation.machine.answerAsk(1, .success([6, 0xFF, 0xFF, 0xFF, 0xFF]), maximumBytes: 1024))
        #expect(try conversation.sentToWorker() == [.answer(ask: 1, bytes: [6, 0xFF, 0xFF, 0xFF, 0xFF])])
        try conversation.worker(.callResult(id: call, FunctionCallReply(.void)))
        #expect(try conversation.requests[call]?.get() == .value(FunctionCallReply(.void)))
        #expect(conversation.cancelledHandlers.isEmpty)
    }

    @Test("a callback of a call nobody waits for fails at once; one of a call that ends while its handler runs is cancelled")
    func outlivingTheCall() throws {
        var conversation = Conversation()
        try conversation.ready()
        try conversation.worker(.callback(id: 1, call: 99, parameter: 0, arguments: []))
        #expect(try conversation.sentToWorker().map(\.askFailureReason) == [.closed])
        #expect(conversation.callbackHandlers.isEmpty)

        let call = try conversation.call()
        _ = try conversation.sentToWorker()
        try conversation.worker(.callback(id: 2, call: call, parameter: 0, arguments: []))
        try conversation.worker(.callbackFailed(id: call, message: "callback 'compar' of qsort failed in the host's handler: no"))
        #expect(failureCode(conversation.requests[call]) == .callbackFailed)
        #expect(conversation.cancelledHandlers == [2])
        // The handler's late answer goes nowhere.
        conversation.apply(conversation.machine.answerAsk(2, .success([]), maximumBytes: 1024))
        #expect(try conversation.sentToWorker() == [])
    }

    @Test("an ask identifier the worker uses twice is a protocol violation; a crash cancels the running handlers")
    func violationsAndCrashes() throws {
        var conversation = Conversation()
        try conversation.ready()
        let call = try conversation.call()
        _ = try conversation.sentToWorker()
        try conversation.worker(.callback(id: 5, call: call, parameter: 0, arguments: []))
        try conversation.worker(.callback(id: 5, call: call, parameter: 0, arguments: []))
        #expect(conversation.stops.count == 1)

        var crashing = Conversation()
        try crashing.ready()
        let crashed = try crashing.call()
        _ = try crashing.sentToWorker()
        try crashing.worker(.callback(id: 1, call: crashed, parameter: 0, arguments: [.int64(1)]))
        crashing.end(.signaled(signal: 11, coreDumped: false))
        #expect(crashing.cancelledHandlers == [1])
        #expect(failureCode(crashing.requests[crashed]) == .workerCrashed)
    }

    @Test("a call result in shared memory is read there and decoded as the pipe's; bytes that are not one stop the worker")
    func sharedCallResult() throws {
        var conversation = Conversation()
        try conversation.ready()
        let call = try conversation.call()
        _ = try conversation.sentToWorker()
        let location = SharedMemoryLocation(offset: 0, length: 64)
        let effects = conversation.machine.receive(.sharedCallResult(id: call, location))
        guard case .sharedCallResult(call, location)? = effects.first else {
            Issue.record("no read of the region: \(effects)")
            return
        }
        var writer = PayloadWriter()
        writer.write(FunctionCallReply(.int32(0), outputs: [.bytes([1, 2, 3])]))
        conversation.apply(conversation.machine.complete(sharedCallResult: call, bytes: writer.bytes))
        #expect(try conversation.requests[call]?.get() == .value(FunctionCallReply(.int32(0), outputs: [.bytes([1, 2, 3])])))

        let second = try conversation.call()
        _ = try conversation.sentToWorker()
        conversation.apply(conversation.machine.complete(sharedCallResult: second, bytes: writer.bytes + [0]))
        #expect(conversation.stops.count == 1, "trailing bytes after the reply: a protocol violation")
    }
}
