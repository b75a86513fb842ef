// Package kit writes plugind plugins in Go, built with -buildmode=c-shared.
//
// A plugin is a type with a Handle method, registered from an init function of package main:
//
//	package main
//
//	import "plugind/kit"
//
//	type greeter struct{}
//
//	func (greeter) Handle(request *kit.Request) ([]byte, error) {
//		name, err := request.Ask([]byte("name?")) // asks the host, waits for the answer
//		if err != nil {
//			return nil, err
//		}
//		return append([]byte("Hello, "+string(name)+": "), request.Bytes()...), nil
//	}
//
//	func init() {
//		kit.Register(kit.Definition{Name: "Greeter", Version: "1.0.0",
//			New: func(kit.Host) (kit.Plugin, error) { return greeter{}, nil }})
//	}
//
//	func main() {}
//
// Every failure is an error value: a returned *kit.Error keeps its code, any other error is
// code 1; a panic in New, Handle, Accept or Close is recovered and reaches the host as a plugin
// error ("panic: …"). An answer over the worker's message limit is an error naming its size.
// A panic in a goroutine of the plugin's own is not recovered: it ends the worker, as it would
// end any Go program, and the host sees the worker crash.
package kit

/*
#cgo CFLAGS: -I${SRCDIR}/include
#include "kit.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

const (
	errnoNotSupported    = 95
	errnoMessageSize     = 90
	errnoOutOfMemory     = 12
	errnoRemoteIO        = 121
	errnoConnectionReset = 104
)

// Plugin answers requests. Handle may run on several goroutines at once (Definition.Concurrency).
type Plugin interface {
	Handle(request *Request) ([]byte, error)
}

// Acceptor is implemented by a plugin that keeps state per connection or refuses some: the state
// it returns comes back with every request of the connection (Request.State); an error refuses
// the connection with its message.
type Acceptor interface {
	Accept(connection ConnectionInfo) (state any, err error)
}

// Closer is implemented by a plugin that wants to know when a connection closes.
type Closer interface {
	Close(connection ConnectionInfo)
}

// Definition is what Register needs: the plugin's name and version, how many requests it takes
// at once (0 or 1: one), and how to make it.
type Definition struct {
	Name        string
	Version     string
	Concurrency int
	New         func(host Host) (Plugin, error)
}

// Error is a plugin error with a code (positive) the host receives with the message.
type Error struct {
	Code    int32
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// Errorf makes an Error with code 1.
func Errorf(format string, arguments ...any) *Error {
	return &Error{Code: 1, Message: fmt.Sprintf(format, arguments...)}
}

// AskError says why an ask has no answer: Status is the errno value (ENOTSUP: the host gave the
// connection no handler; EREMOTEIO: its handler failed, with Code and Message; ETIMEDOUT;
// ECONNRESET: the connection is closed; EBUSY, EMSGSIZE, ELOOP, EINVAL; see plugind_plugin.h).
type AskError struct {
	Status  int32
	Code    int32
	Message string
}

func (e *AskError) Error() string { return fmt.Sprintf("%s (errno %d)", e.Message, e.Status) }

// Closed reports whether the connection was closed.
func (e *AskError) Closed() bool { return e.Status == errnoConnectionReset }

// LogLevel is the severity of a log line.
type LogLevel int32

const (
	Debug LogLevel = iota
	Info
	Warning
	Failure
)

// Host is the worker's services, valid for the plugin's lifetime, safe from any goroutine.
type Host struct {
	raw *C.plugind_host
}

// Log sends one line to the host's log.
func (h Host) Log(level LogLevel, message string) {
	text := C.CString(message)
	defer C.free(unsafe.Pointer(text))
	C.plugind_go_log(h.raw, C.int32_t(level), text)
}

// Ask asks the host on connection and waits for its answer (timeout 0: the request timeout).
func (h Host) Ask(connection uint32, question []byte, timeout time.Duration) ([]byte, error) {
	var answer C.plugind_plugin_answer
	var bytes unsafe.Pointer
	if len(question) > 0 {
		bytes = unsafe.Pointer(&question[0])
	}
	milliseconds := uint32(0)
	if timeout > 0 {
		milliseconds = uint32((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	status := int32(C.plugind_go_ask(h.raw, C.uint32_t(connection), bytes, C.size_t(len(question)), C.uint32_t(milliseconds), &answer))
	if status == 0 {
		result := C.GoBytes(unsafe.Pointer(answer.bytes), C.int(answer.length))
		C.plugind_go_release_answer(h.raw, &answer)
		return result, nil
	}
	failure := &AskError{Status: status, Code: int32(answer.code), Message: fmt.Sprintf("errno %d", status)}
	if status == errnoRemoteIO {
		if answer.message != nil {
			failure.Message = C.GoString(answer.message)
		}
		C.plugind_go_release_answer(h.raw, &answer)
	} else if status == errnoConnectionReset {
		failure.Message = "the connection is closed"
	} else if status == errnoNotSupported {
		failure.Message = "the host gave the connection no request handler"
	}
	return nil, failure
}

// ConnectionInfo is a connection as Accept and Close see it.
type ConnectionInfo struct {
	Identifier uint32
	// HostIdentifier is the identifier of the host application that opened it.
	HostIdentifier string
}

// Connection is a connection to ask the host on, from any goroutine, also after the request
// returned (a closed one answers with an AskError whose Closed() is true).
type Connection struct {
	host       Host
	Identifier uint32
}

// Ask asks the host on this connection.
func (c Connection) Ask(question []byte, timeout time.Duration) ([]byte, error) {
	return c.host.Ask(c.Identifier, question, timeout)
}

// Request is one request; its methods are valid while Handle runs (Bytes is a copy, valid after).
type Request struct {
	host       Host
	identifier uint64
	bytes      []byte
	record     *connectionRecord
}

// Bytes returns the request's bytes.
func (r *Request) Bytes() []byte { return r.bytes }

// Text returns the request's bytes as a string.
func (r *Request) Text() string { return string(r.bytes) }

// Connection returns the connection the request came on, or nil.
func (r *Request) Connection() *Connection {
	if r.record == nil {
		return nil
	}
	return &Connection{host: r.host, Identifier: r.record.info.Identifier}
}

// ConnectionInfo returns the connection as Accept saw it, or nil.
func (r *Request) ConnectionInfo() *ConnectionInfo {
	if r.record == nil {
		return nil
	}
	return &r.record.info
}

// State returns what Accept returned for the connection, or nil.
func (r *Request) State() any {
	if r.record == nil {
		return nil
	}
	return r.record.state
}

// Ask asks the host on the request's connection and waits for the answer.
func (r *Request) Ask(question []byte) ([]byte, error) {
	connection := r.Connection()
	if connection == nil {
		return nil, &AskError{Status: errnoNotSupported, Message: "the request came on no connection"}
	}
	return connection.Ask(question, 0)
}

// Cancelled reports whether the host cancelled the request or gave up on it: return early.
func (r *Request) Cancelled() bool {
	return bool(C.plugind_go_is_cancelled(r.host.raw, C.uint64_t(r.identifier)))
}

// ReportProgress reports completed out of total units (total 0: unknown).
func (r *Request) ReportProgress(completed, total uint64) {
	C.plugind_go_report_progress(r.host.raw, C.uint64_t(r.identifier), C.uint64_t(completed), C.uint64_t(total))
}

var (
	registration sync.Mutex
	registered   *Definition
)

// Register makes definition the library's plugin; call it once, from an init function.
func Register(definition Definition) {
	registration.Lock()
	defer registration.Unlock()
	registered = &definition
}

func definition() *Definition {
	registration.Lock()
	defer registration.Unlock()
	return registered
}

type instance struct {
	plugin Plugin
	host   Host
}

type connectionRecord struct {
	info  ConnectionInfo
	state any
}

func setError(host *C.plugind_host, response *C.plugind_plugin_response, message string) {
	text := C.CString(message)
	defer C.free(unsafe.Pointer(text))
	C.plugind_go_set_error(host, response, text)
}

// failure turns an error into the status and message the host receives.
func failure(host *C.plugind_host, response *C.plugind_plugin_response, err error) C.int32_t {
	var pluginError *Error
	if errors.As(err, &pluginError) && pluginError.Code > 0 {
		setError(host, response, pluginError.Message)
		return C.int32_t(pluginError.Code)
	}
	setError(host, response, err.Error())
	return 1
}

// recovered turns a panic into a plugin error on response.
func recovered(host *C.plugind_host, response *C.plugind_plugin_response, status *C.int32_t) {
	if value := recover(); value != nil {
		setError(host, response, fmt.Sprintf("panic: %v", value))
		*status = 1
	}
}

var descriptorStrings struct {
	once          sync.Once
	name, version *C.char
}

func descriptorNames() (*C.char, *C.char) {
	descriptorStrings.once.Do(func() {
		name, version := "Go plugin", ""
		if definition := definition(); definition != nil {
			name, version = definition.Name, definition.Version
		}
		// Kept for the library's lifetime: the worker reads them when it likes.
		descriptorStrings.name, descriptorStrings.version = C.CString(name), C.CString(version)
	})
	return descriptorStrings.name, descriptorStrings.version
}

//export plugindGoName
func plugindGoName() *C.char { name, _ := descriptorNames(); return name }

//export plugindGoVersion
func plugindGoVersion() *C.char { _, version := descriptorNames(); return version }

//export plugindGoConcurrency
func plugindGoConcurrency() C.int32_t {
	if definition := definition(); definition != nil && definition.Concurrency > 1 {
		return C.int32_t(definition.Concurrency)
	}
	return 1
}

//export plugindGoInit
func plugindGoInit(host *C.plugind_host, response *C.plugind_plugin_response, handle *C.uintptr_t) (status C.int32_t) {
	defer recovered(host, response, &status)
	definition := definition()
	if definition == nil || definition.New == nil {
		setError(host, response, "the library registers no plugin (call kit.Register from an init function)")
		return 1
	}
	plugin, err := definition.New(Host{raw: host})
	if err != nil {
		return failure(host, response, err)
	}
	*handle = C.uintptr_t(cgo.NewHandle(&instance{plugin: plugin, host: Host{raw: host}}))
	return 0
}

//export plugindGoHandle
func plugindGoHandle(state C.uintptr_t, raw *C.plugind_plugin_request, response *C.plugind_plugin_response) (status C.int32_t) {
	instance := cgo.Handle(state).Value().(*instance)
	defer recovered(instance.host.raw, response, &status)
	request := &Request{
		host:       instance.host,
		identifier: uint64(raw.identifier),
		bytes:      C.GoBytes(unsafe.Pointer(raw.bytes), C.int(raw.length)),
	}
	if raw.connection_state != nil {
		request.record = cgo.Handle(uintptr(raw.connection_state)).Value().(*connectionRecord)
	}
	answer, err := instance.plugin.Handle(request)
	if err != nil {
		return failure(instance.host.raw, response, err)
	}
	var bytes unsafe.Pointer
	if len(answer) > 0 {
		bytes = unsafe.Pointer(&answer[0])
	}
	appended := C.plugind_go_append(instance.host.raw, response, bytes, C.size_t(len(answer)))
	if appended == errnoMessageSize || appended == errnoOutOfMemory {
		setError(instance.host.raw, response, fmt.Sprintf("the answer of %d bytes is over the worker's message limit", len(answer)))
		return errnoMessageSize
	}
	return appended
}

//export plugindGoDeinit
func plugindGoDeinit(state C.uintptr_t) {
	defer func() { _ = recover() }()
	if state != 0 {
		cgo.Handle(state).Delete()
	}
}

//export plugindGoAccept
func plugindGoAccept(state C.uintptr_t, identifier C.uint32_t, hostIdentifier *C.char, refusal *C.plugind_plugin_response, handle *C.uintptr_t) (status C.int32_t) {
	instance := cgo.Handle(state).Value().(*instance)
	defer recovered(instance.host.raw, refusal, &status)
	record := &connectionRecord{info: ConnectionInfo{Identifier: uint32(identifier), HostIdentifier: C.GoString(hostIdentifier)}}
	if acceptor, ok := instance.plugin.(Acceptor); ok {
		connectionState, err := acceptor.Accept(record.info)
		if err != nil {
			return failure(instance.host.raw, refusal, err)
		}
		record.state = connectionState
	}
	*handle = C.uintptr_t(cgo.NewHandle(record))
	return 0
}

//export plugindGoClose
func plugindGoClose(state C.uintptr_t, identifier C.uint32_t, connectionState C.uintptr_t) {
	if connectionState == 0 {
		return
	}
	instance := cgo.Handle(state).Value().(*instance)
	record := cgo.Handle(connectionState).Value().(*connectionRecord)
	defer cgo.Handle(connectionState).Delete()
	defer func() {
		if value := recover(); value != nil {
			instance.host.Log(Failure, fmt.Sprintf("close of connection %d: panic: %v", identifier, value))
		}
	}()
	if closer, ok := instance.plugin.(Closer); ok {
		closer.Close(record.info)
	}
}
