// The Go kit's probe for KitProbeTests; it answers what the C++ probe does
// (ExamplePlugins/Testing/CppKitProbe/probe.cpp), with a panic for "throw".
package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"plugind/kit"
)

type probe struct {
	host       kit.Host
	remembered atomic.Uint32
}

type counter struct{ requests atomic.Int64 }

func (p *probe) Accept(connection kit.ConnectionInfo) (any, error) {
	if strings.HasSuffix(connection.HostIdentifier, ".untrusted") {
		return nil, kit.Errorf("KitProbe does not serve %s", connection.HostIdentifier)
	}
	return &counter{}, nil
}

func (p *probe) Handle(request *kit.Request) ([]byte, error) {
	text := request.Text()
	switch {
	case text == "":
		return nil, nil
	case text == "count":
		state, ok := request.State().(*counter)
		if !ok {
			return nil, kit.Errorf("no connection state")
		}
		return []byte(strconv.FormatInt(state.requests.Add(1), 10)), nil
	case text == "host":
		if info := request.ConnectionInfo(); info != nil {
			return []byte(info.HostIdentifier), nil
		}
		return nil, nil
	case text == "throw":
		panic("asked to panic")
	case text == "error":
		return nil, &kit.Error{Code: 7, Message: "asked to fail"}
	case text == "oversized":
		return bytes.Repeat([]byte("x"), 2<<20), nil
	case text == "remember":
		if connection := request.Connection(); connection != nil {
			p.remembered.Store(connection.Identifier)
		}
		return []byte("remembered"), nil
	case text == "ask-remembered":
		answer, err := p.host.Ask(p.remembered.Load(), []byte("still there?"), 0)
		if err != nil {
			if failure, ok := err.(*kit.AskError); ok {
				return []byte(fmt.Sprintf("ask failed:%d", failure.Status)), nil
			}
			return nil, err
		}
		return append([]byte("answered:"), answer...), nil
	case strings.HasPrefix(text, "ask:"):
		answer, err := request.Ask(request.Bytes()[4:])
		if err != nil {
			return nil, &kit.Error{Code: 5, Message: "the ask failed: " + err.Error()}
		}
		return append([]byte("answer:"), answer...), nil
	}
	return nil, kit.Errorf("unknown request '%s'", text)
}

func init() {
	kit.Register(kit.Definition{Name: "KitProbe (Go)", Version: "1.0.0", Concurrency: 4, New: func(host kit.Host) (kit.Plugin, error) {
		return &probe{host: host}, nil
	}})
}

func main() {}
