import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindSystem
import TestSupport
import Testing

/// Handles (opaque pointers of a kind the manifest declares) through the confined worker, against
/// the machine's own SQLite (ExamplePlugins/Sqlite, by soname): databases and statements the
/// worker keeps in its handle table and the host holds by number. Results are compared with
/// Python's sqlite3 module running the same statements; forged, released and wrong-kind handles
/// are refused before SQLite sees them.
@Suite("Typed calls with handles (SQLite)", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct TypedCallHandleTests {
    static let sqliteOK = FunctionValue.int32(0)
    static let sqliteRow = FunctionValue.int32(100)
    static let sqliteDone = FunctionValue.int32(101)

    /// The SQLite example bundle, as it ships, launched.
    static func launchSqlite(in test: TestHost) async throws -> AppExtensionProcess {
        let path = BuiltProducts.packageRoot + "/ExamplePlugins/Sqlite/manifest.json"
        let bundle = test.bundledRoot + "/sqlite.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: path, toPath: bundle + "/manifest.json")
        return try await AppExtensionProcess(configuration: try test.configuration("org.plugind.examples.sqlite"))
    }

    static func handle(_ value: FunctionValue?) throws -> FunctionHandle {
        guard case .handle(let handle)? = value else { throw TestFailure("expected a handle, got \(String(describing: value))") }
        return handle
    }

    /// Opens an in-memory database.
    static func open(_ connection: AppExtensionConnection) async throws -> FunctionHandle {
        let opened = try await connection.callWithOutputs("sqlite3_open", arguments: [.string(":memory:")])
        #expect(opened.value == sqliteOK)
        return try handle(opened[output: "ppDb"])
    }

    static func prepare(_ connection: AppExtensionConnection, _ db: FunctionHandle, _ sql: String) async throws -> FunctionHandle {
        let prepared = try await connection.callWithOutputs("sqlite3_prepare_v2", arguments: [.handle(db), .string(sql), .int32(-1)])
        let statement = try handle(prepared[output: "ppStmt"])
        if prepared.value != sqliteOK || statement.isNull {
            let message = try await connection.call("sqlite3_errmsg", arguments: [.handle(db)])
            throw TestFailure("prepare of \(sql) failed: \(prepared.value) \(message)")
        }
        return statement
    }

    /// Runs a statement that returns no rows.
    static func execute(_ connection: AppExtensionConnection, _ db: FunctionHandle, _ sql: String) async throws {
        let statement = try await prepare(connection, db, sql)
        #expect(try await connection.call("sqlite3_step", arguments: [.handle(statement)]) == sqliteDone)
        #expect(try await connection.call("sqlite3_finalize", arguments: [.handle(statement)]) == sqliteOK)
    }

    /// The refusal a call of `function` with `arguments` gets: an `invalidArguments` error.
    static func refusal(
        _ connection: AppExtensionConnection, _ function: String, _ arguments: [FunctionValue]
    ) async -> String {
        do {
            let value = try await connection.call(function, arguments: arguments)
            Issue.record("\(function) was called and returned \(value)")
            return ""
        } catch let error as AppExtensionError {
            #expect(error.code == .invalidArguments, "\(error)")
            return error.reason
        } catch {
            Issue.record("unexpected \(error)")
            return ""
        }
    }

    static let create = "CREATE TABLE numbers (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, label TEXT)"
    static let insert = "INSERT INTO numbers (n, label) VALUES (?1, CASE WHEN ?1 < 0 THEN NULL ELSE 'n=' || ?1 END)"
    static let select = "SELECT id, n, label, n * 3, typeof(label) FROM numbers ORDER BY n"
    static let values: [Int64] = [42, 0, -7, 1 << 40, -(1 << 50), 1, Int64.max / 3]

    @Test("open, create, insert with bound parameters, select: the rows Python's sqlite3 gets for the same statements")
    func sameRowsAsPython() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await Self.launchSqlite(in: test)
        let connection = try await process.makeConnection()

        let db = try await Self.open(connection)
        #expect(db.kind == "sqlite3" && !db.isNull)
        try await Self.execute(connection, db, Self.create)
        let insert = try await Self.prepare(connection, db, Self.insert)
        #expect(insert.kind == "sqlite3_stmt" && insert.id != db.id)
        for value in Self.values {
            #expect(
                try await connection.call("sqlite3_bind_int64", arguments: [.handle(insert), .int32(1), .int64(value)]) == Self.sqliteOK)
            #expect(try await connection.call("sqlite3_step", arguments: [.handle(insert)]) == Self.sqliteDone)
            #expect(try await connection.call("sqlite3_reset", arguments: [.handle(insert)]) == Self.sqliteOK)
        }
        #expect(try await connection.call("sqlite3_finalize", arguments: [.handle(insert)]) == Self.sqliteOK)

        let select = try await Self.prepare(connection, db, Self.select)
        // The statement's database is the database: the same number, the same object.
        let owner = try Self.handle(try await connection.call("sqlite3_db_handle", arguments: [.handle(select)]))
        #expect(owner === db)
        // The SELECT names five columns; a statement handle's own answer, before any step.
        #expect(try await connection.call("sqlite3_column_count", arguments: [.handle(select)]) == .int32(5))
        var rows: [[String]] = []
        while try await connection.call("sqlite3_step", arguments: [.handle(select)]) == Self.sqliteRow {
            var row: [String] = []
            for column in Int32(0)..<5 {
                let arguments: [FunctionValue] = [.handle(select), .int32(column)]
                switch try await connection.call("sqlite3_column_type", arguments: arguments) {
                case .int32(1): row.append("\(try await connection.call("sqlite3_column_int64", arguments: arguments))")
                case .int32(3): row.append("'\(try await connection.call("sqlite3_column_text", arguments: arguments))'")
                case .int32(5): row.append("NULL")
                case let other: Issue.record("column \(column) has type \(other)")
                }
            }
            rows.append(row)
        }
        #expect(try await connection.call("sqlite3_finalize", arguments: [.handle(select)]) == Self.sqliteOK)

        // SQL that does not parse: SQLite writes NULL through ppStmt, a NULL handle.
        let broken = try await connection.callWithOutputs("sqlite3_prepare_v2", arguments: [.handle(db), .string("SELEKT 1"), .int32(-1)])
        #expect(broken.value == .int32(1))
        #expect(try Self.handle(broken[output: "ppStmt"]) == FunctionHandle.null(kind: "sqlite3_stmt"))
        guard case .string(let message) = try await connection.call("sqlite3_errmsg", arguments: [.handle(db)]) else {
            Issue.record("sqlite3_errmsg returned no string")
            return
        }
        #expect(try await connection.call("sqlite3_close_v2", arguments: [.handle(db)]) == Self.sqliteOK)
        #expect(db.isReleased)

        let program = """
            import json, sqlite3, sys
            create, insert, select, values = json.loads(sys.argv[1])
            db = sqlite3.connect(":memory:")
            db.execute(create)
            for value in values:
                db.execute(insert, (value,))
            rows = [["NULL" if v is None else ("'%s'" % v if isinstance(v, str) else str(v)) for v in row] for row in db.execute(select)]
            try:
                db.execute("SELEKT 1")
                error = ""
            except sqlite3.Error as failure:
                error = str(failure)
            print(json.dumps({"rows": rows, "error": error}))
            """
        let input = try JSONSerialization.data(withJSONObject: [
            Self.create, Self.insert, Self.select, Self.values.map { NSNumber(value: $0) },
        ])
        let result = try await CommandRunner.run(
            "/usr/bin/env", ["python3", "-c", program, String(decoding: input, as: UTF8.self)],
            environment: ProcessInfo.processInfo.environment)
        try #require(result.status == 0, "python3 failed: \(result.stderr)")
        let python = try #require(try JSONSerialization.jsonObject(with: Data(result.standardOutput)) as? [String: Any])
        #expect(rows.count == Self.values.count)
        #expect(rows == python["rows"] as? [[String]])
        #expect(message == python["error"] as? String)
        await process.invalidateAndWait()
    }

    @Test("sqlite3_exec with the host answering its row callback: the rows, NULLs and column names Python's sqlite3 gets")
    func execRowCallback() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await Self.launchSqlite(in: test)
        let connection = try await process.makeConnection()
        let db = try await Self.open(connection)
        let script = [Self.create] + Self.values.map { "INSERT INTO numbers (n, label) VALUES (\($0), \($0 < 0 ? "NULL" : "'n=\($0)'"))" }
        #expect(
            try await connection.call(
                "sqlite3_exec", arguments: [.handle(db), .string(script.joined(separator: "; "))],
                callbacks: ["callback": { _ in .int32(0) }]) == Self.sqliteOK)
        let rows = Locked<[[String]]>([])
        let names = Locked<[String]>([])
        // sqlite3_exec's callback gets every column as text (NULL as a NULL pointer: void here).
        let status = try await connection.call(
            "sqlite3_exec", arguments: [.handle(db), .string("SELECT n, label, n * 3 AS triple FROM numbers ORDER BY n")],
            callbacks: [
                "callback": { arguments in
                    guard case .int32(let count) = arguments.first, arguments.count == 1 + 2 * Int(count) else { return .int32(1) }
                    let values = arguments[1...Int(count)].map { value -> String in
                        if case .string(let text) = value { return "'\(text)'" }
                        return "NULL"
                    }
                    rows.withLock { $0.append(values) }
                    names.withLock { $0 = arguments[(1 + Int(count))...].map(\.description) }
                    return .int32(0)
                }
            ])
        #expect(status == Self.sqliteOK)
        // A callback that answers non-zero aborts the statement: SQLITE_ABORT.
        let aborted = try await connection.call(
            "sqlite3_exec", arguments: [.handle(db), .string("SELECT n FROM numbers")], callbacks: ["callback": { _ in .int32(1) }])
        #expect(aborted == .int32(4))
        #expect(try await connection.call("sqlite3_close_v2", arguments: [.handle(db)]) == Self.sqliteOK)

        let program = """
            import json, sqlite3, sys
            db = sqlite3.connect(":memory:")
            db.executescript("; ".join(json.loads(sys.argv[1])))
            cursor = db.execute("SELECT CAST(n AS TEXT), label, CAST(n * 3 AS TEXT) AS triple FROM numbers ORDER BY n")
            rows = [["NULL" if v is None else "'%s'" % v for v in row] for row in cursor]
            print(json.dumps({"rows": rows, "names": ["n", "label", "triple"]}))
            """
        let input = try JSONSerialization.data(withJSONObject: script)
        let result = try await CommandRunner.run(
            "/usr/bin/env", ["python3", "-c", program, String(decoding: input, as: UTF8.self)],
            environment: ProcessInfo.processInfo.environment)
        try #require(result.status == 0, "python3 failed: \(result.stderr)")
        let python = try #require(try JSONSerialization.jsonObject(with: Data(result.standardOutput)) as? [String: Any])
        #expect(rows.withLock { $0.count } == Self.values.count)
        #expect(rows.withLock { $0 } == python["rows"] as? [[String]])
        #expect(names.withLock { $0 } == python["names"] as? [String])
        await process.invalidateAndWait()
    }

    @Test("a forged number, a released handle and a handle of another kind are refused, naming the function and argument")
    func refusals() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await Self.launchSqlite(in: test)
        let connection = try await process.makeConnection()
        let db = try await Self.open(connection)
        let statement = try await Self.prepare(connection, db, "SELECT 1")

        // Refused by the worker: numbers it never gave out, or that name another kind.
        let forged = await Self.refusal(connection, "sqlite3_errmsg", [.handle(FunctionHandle(kind: "sqlite3", id: 1_000_000))])
        #expect(forged.contains("sqlite3_errmsg") && forged.contains("('db')") && forged.contains("never gave out"), "\(forged)")
        let disguised = await Self.refusal(connection, "sqlite3_errmsg", [.handle(FunctionHandle(kind: "sqlite3", id: statement.id))])
        #expect(
            disguised.contains("sqlite3_errmsg") && disguised.contains("('db')") && disguised.contains("sqlite3_stmt handle"),
            "\(disguised)")
        let forgedRelease = await Self.refusal(
            connection, "sqlite3_finalize", [.handle(FunctionHandle(kind: "sqlite3_stmt", id: db.id))])
        #expect(
            forgedRelease.contains("sqlite3_finalize") && forgedRelease.contains("('stmt')") && forgedRelease.contains("sqlite3 handle"))

        // Refused by the host before anything is sent: the declared kind, NULL.
        let wrongKind = await Self.refusal(connection, "sqlite3_step", [.handle(db)])
        #expect(wrongKind.contains("sqlite3_step") && wrongKind.contains("('stmt')") && wrongKind.contains("not a sqlite3_stmt handle"))
        let null = await Self.refusal(connection, "sqlite3_step", [.handle(.null(kind: "sqlite3_stmt"))])
        #expect(null.contains("sqlite3_step") && null.contains("NULL"))

        // Released: the host knows its own object was; the worker refuses the number.
        #expect(try await connection.call("sqlite3_finalize", arguments: [.handle(statement)]) == Self.sqliteOK)
        #expect(statement.isReleased)
        let released = await Self.refusal(connection, "sqlite3_step", [.handle(statement)])
        #expect(released.contains("sqlite3_step") && released.contains("('stmt')") && released.contains("was released"))
        let again = await Self.refusal(connection, "sqlite3_step", [.handle(FunctionHandle(kind: "sqlite3_stmt", id: statement.id))])
        #expect(again.contains("sqlite3_step") && again.contains("('stmt')") && again.contains("was released"), "\(again)")

        // None of it reached SQLite: the database still answers.
        #expect(try await connection.call("sqlite3_errmsg", arguments: [.handle(db)]) == .string("not an error"))
        try await db.release()
        #expect(db.isReleased)
        try await db.release()
        let closed = await Self.refusal(connection, "sqlite3_errmsg", [.handle(FunctionHandle(kind: "sqlite3", id: db.id))])
        #expect(closed.contains("was released"))
        await process.invalidateAndWait()
    }

    @Test("dropping the last reference to a handle releases it: the worker refuses its number afterwards")
    func releasedWhenDropped() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await Self.launchSqlite(in: test)
        let connection = try await process.makeConnection()
        let kept = try await Self.open(connection)

        var numbers: (db: UInt64, statement: UInt64) = (0, 0)
        do {
            let db = try await Self.open(connection)
            let statement = try await Self.prepare(connection, db, "SELECT 1")
            #expect(try await connection.call("sqlite3_step", arguments: [.handle(statement)]) == Self.sqliteRow)
            numbers = (db.id, statement.id)
        }
        await process.settleHandleReleases()
        for (function, kind, id) in [("sqlite3_errmsg", "sqlite3", numbers.db), ("sqlite3_step", "sqlite3_stmt", numbers.statement)] {
            let refusal = await Self.refusal(connection, function, [.handle(FunctionHandle(kind: kind, id: id))])
            #expect(refusal.contains(function) && refusal.contains("was released"), "\(refusal)")
        }
        // The handle still held is untouched.
        #expect(try await connection.call("sqlite3_errmsg", arguments: [.handle(kept)]) == .string("not an error"))
        await process.invalidateAndWait()
    }
}
