import CPlugindShims
import Glibc
import PlugindWire

/// Drives a frei0r 1.2 library (one plugin per library): `f0r_init` at load, plugin and parameter
/// info to describe it, `f0r_construct` with every frame in the data area (16-byte aligned as
/// frei0r asks), parameters set and read by their declared types, `f0r_update` or
/// `f0r_update2` by plugin type (mixers need not export `f0r_update`), and `f0r_destruct` and
/// `f0r_deinit` at the end.
final class Frei0rAdapter: ForeignAdapter {
    static let maximumParameters: Int32 = 1024
    /// frei0r's sizes: multiples of 8, at most 2048 each way.
    static let sizes: ClosedRange<UInt32> = 8...2048

    private struct Functions {
        var finish: plugind_frei0r_deinit_function
        var paramInfo: plugind_frei0r_param_info_function
        var construct: plugind_frei0r_construct_function
        var destruct: plugind_frei0r_destruct_function
        var setParam: plugind_frei0r_param_value_function
        var getParam: plugind_frei0r_param_value_function
        var update: plugind_frei0r_update_function?
        var update2: plugind_frei0r_update2_function?
    }

    private let path: String
    private let functions: Functions
    private let info: plugind_frei0r_plugin_info
    private let inputCount: Int
    private let parameterTypes: [Int32]
    private let dataArea: UnsafeMutableRawBufferPointer?
    private var instance: UnsafeMutableRawPointer?
    private var frames: (inputs: [UnsafePointer<UInt32>], output: UnsafeMutablePointer<UInt32>)?

    var displayName: String { path }

    init(library: UnsafeMutableRawPointer, path: String, dataArea: UnsafeMutableRawBufferPointer?) throws(LoadFailure) {
        func required<T>(_ name: String, _ type: T.Type) throws(LoadFailure) -> T {
            guard let function = ForeignSymbol.function(library, name, as: type) else {
                throw LoadFailure(kind: .symbolMissing, message: "\(path) does not export \(name): it is not a frei0r library")
            }
            return function
        }
        let initialize = try required("f0r_init", plugind_frei0r_init_function.self)
        let pluginInfo = try required("f0r_get_plugin_info", plugind_frei0r_plugin_info_function.self)
        var functions = Functions(
            finish: try required("f0r_deinit", plugind_frei0r_deinit_function.self),
            paramInfo: try required("f0r_get_param_info", plugind_frei0r_param_info_function.self),
            construct: try required("f0r_construct", plugind_frei0r_construct_function.self),
            destruct: try required("f0r_destruct", plugind_frei0r_destruct_function.self),
            setParam: try required("f0r_set_param_value", plugind_frei0r_param_value_function.self),
            getParam: try required("f0r_get_param_value", plugind_frei0r_param_value_function.self))
        functions.update = ForeignSymbol.function(library, "f0r_update", as: plugind_frei0r_update_function.self)
        functions.update2 = ForeignSymbol.function(library, "f0r_update2", as: plugind_frei0r_update2_function.self)
        // frei0r gives f0r_init's result no meaning, and plugins return either value.
        _ = initialize()
        var info = plugind_frei0r_plugin_info()
        pluginInfo(&info)
        let inputs: Int
        switch info.plugin_type {
        case 0: inputs = 1
        case 1: inputs = 0
        case 2: inputs = 2
        case 3: inputs = 3
        default: throw LoadFailure(kind: .abiMismatch, message: "\(path): unknown frei0r plugin type \(info.plugin_type)")
        }
        // Mixers are updated with f0r_update2 alone; filters and sources with either.
        guard inputs >= 2 ? functions.update2 != nil : functions.update != nil || functions.update2 != nil else {
            throw LoadFailure(kind: .symbolMissing, message: "\(path) exports no update function its plugin type needs")
        }
        guard (0...Self.maximumParameters).contains(info.num_params) else {
            throw LoadFailure(kind: .abiMismatch, message: "\(path) declares \(info.num_params) parameters")
        }
        var types: [Int32] = []
        for index in 0..<info.num_params {
            var parameter = plugind_frei0r_param_info()
            functions.paramInfo(&parameter, index)
            types.append(parameter.type)
        }
        self.path = path
        self.functions = functions
        self.info = info
        self.inputCount = inputs
        self.parameterTypes = types
        self.dataArea = dataArea
    }

    func answer(_ request: ForeignPluginRequest) throws(ForeignAdapterFailure) -> [UInt8] {
        switch request {
        case .describe: return ForeignLibraryDescription.frei0r(describe()).encoded
        case .construct(let width, let height): return try construct(width: width, height: height).encoded
        case .setParameter(let index, let value):
            try setParameter(index, value)
            return []
        case .getParameter(let index):
            guard let instance else { throw ForeignAdapterFailure(message: "a parameter read before construct") }
            return try parameter(Int(index), of: instance).encoded
        case .update(let time):
            try update(time)
            return []
        case .instantiate, .run, .reset, .openDoorbell:
            throw ForeignAdapterFailure(message: "a LADSPA request to a frei0r plugin")
        }
    }

    private func describe() -> Frei0rPluginDescription {
        // frei0r declares no defaults: a parameter's default is its value right after construct.
        let probe = functions.construct(Self.sizes.lowerBound, Self.sizes.lowerBound)
        defer { if let probe { functions.destruct(probe) } }
        var parameters: [Frei0rParameterDescription] = []
        for index in 0..<info.num_params {
            var parameter = plugind_frei0r_param_info()
            functions.paramInfo(&parameter, index)
            let initial = probe.flatMap { try? self.parameter(Int(index), of: $0) }
            parameters.append(
                Frei0rParameterDescription(
                    name: ForeignText.read(parameter.name), explanation: ForeignText.read(parameter.explanation), type: parameter.type,
                    initialValue: initial))
        }
        return Frei0rPluginDescription(
            name: ForeignText.read(info.name), author: ForeignText.read(info.author), explanation: ForeignText.read(info.explanation),
            pluginType: info.plugin_type, colorModel: info.color_model, frei0rVersion: info.frei0r_version,
            majorVersion: info.major_version, minorVersion: info.minor_version, parameters: parameters)
    }

    private func construct(width: UInt32, height: UInt32) throws(ForeignAdapterFailure) -> ForeignPortLayout {
        guard instance == nil else { throw ForeignAdapterFailure(message: "constructed already (one instance per worker)") }
        guard Self.sizes.contains(width), Self.sizes.contains(height), width % 8 == 0, height % 8 == 0 else {
            throw ForeignAdapterFailure(message: "\(width)×\(height): frei0r sizes are multiples of 8 from 8 to 2048")
        }
        guard let dataArea, dataArea.count > 0 else { throw ForeignAdapterFailure(message: "the worker has no data area for the frames") }
        var layout = DataAreaLayout(dataArea)
        let frameBytes = UInt64(width) * UInt64(height) * 4
        var offsets: [UInt64] = []
        for _ in 0...inputCount {
            guard let offset = layout.place(frameBytes) else {
                throw ForeignAdapterFailure(
                    message: "\(inputCount + 1) frames of \(width)×\(height) do not fit the data area of \(dataArea.count) bytes")
            }
            offsets.append(offset)
        }
        guard let made = functions.construct(width, height) else {
            throw ForeignAdapterFailure(message: "f0r_construct(\(width), \(height)) returned NULL")
        }
        instance = made
        let pointers = offsets.map { layout.pointer(at: $0).assumingMemoryBound(to: UInt32.self) }
        frames = (pointers.dropLast().map { UnsafePointer($0) }, pointers[pointers.count - 1])
        return ForeignPortLayout(offsets: offsets)
    }

    private func checkedType(_ index: UInt32) throws(ForeignAdapterFailure) -> Int32 {
        guard Int(index) < parameterTypes.count else {
            throw ForeignAdapterFailure(message: "no parameter \(index) (the plugin has \(parameterTypes.count))")
        }
        return parameterTypes[Int(index)]
    }

    private func setParameter(_ index: UInt32, _ value: Frei0rParameterValue) throws(ForeignAdapterFailure) {
        guard let instance else { throw ForeignAdapterFailure(message: "a parameter set before construct") }
        let type = try checkedType(index)
        guard type == value.typeNumber else {
            throw ForeignAdapterFailure(message: "parameter \(index) is of type \(type); the value is of type \(value.typeNumber)")
        }
        let slot = Int32(index)
        switch value {
        case .bool(let flag):
            var number: Double = flag ? 1 : 0
            functions.setParam(instance, &number, slot)
        case .double(var number): functions.setParam(instance, &number, slot)
        case .color(let red, let green, let blue):
            var color = plugind_frei0r_color(r: red, g: green, b: blue)
            functions.setParam(instance, &color, slot)
        case .position(let x, let y):
            var position = plugind_frei0r_position(x: x, y: y)
            functions.setParam(instance, &position, slot)
        case .string(let text):
            // The plugin copies the string during the call.
            text.withCString { characters in
                var pointer: UnsafePointer<CChar>? = characters
                functions.setParam(instance, &pointer, slot)
            }
        }
    }

    private func parameter(_ index: Int, of instance: UnsafeMutableRawPointer) throws(ForeignAdapterFailure) -> Frei0rParameterValue {
        let type = try checkedType(UInt32(index))
        let slot = Int32(index)
        switch type {
        case 0, 1:
            var number: Double = 0
            functions.getParam(instance, &number, slot)
            return type == 0 ? .bool(number >= 0.5) : .double(number)
        case 2:
            var color = plugind_frei0r_color()
            functions.getParam(instance, &color, slot)
            return .color(red: color.r, green: color.g, blue: color.b)
        case 3:
            var position = plugind_frei0r_position()
            functions.getParam(instance, &position, slot)
            return .position(x: position.x, y: position.y)
        case 4:
            // The plugin returns a pointer to its own string, which the caller must not free.
            var pointer: UnsafePointer<CChar>?
            functions.getParam(instance, &pointer, slot)
            return .string(ForeignText.read(pointer))
        default:
            throw ForeignAdapterFailure(message: "parameter \(index) has the unknown type \(type)")
        }
    }

    private func update(_ time: Double) throws(ForeignAdapterFailure) {
        guard let instance, let frames else { throw ForeignAdapterFailure(message: "update before construct") }
        guard time.isFinite else { throw ForeignAdapterFailure(message: "update at time \(time)") }
        let input = { (index: Int) -> UnsafePointer<UInt32>? in index < frames.inputs.count ? frames.inputs[index] : nil }
        if inputCount < 2, let update = functions.update {
            update(instance, time, input(0), frames.output)
        } else if let update2 = functions.update2 {
            update2(instance, time, input(0), input(1), input(2), frames.output)
        }
    }

    func end() {
        if let instance { functions.destruct(instance) }
        instance = nil
        frames = nil
        functions.finish()
    }
}
