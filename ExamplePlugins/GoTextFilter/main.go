// The text filter in Go, on plugind's Go kit: reverses the order of the words of its input
// ("one two three" → "three two one"). Built with go build -buildmode=c-shared.
package main

import (
	"strings"

	"plugind/kit"
)

type reverser struct{}

func (reverser) Handle(request *kit.Request) ([]byte, error) {
	words := strings.Fields(request.Text())
	for left, right := 0, len(words)-1; left < right; left, right = left+1, right-1 {
		words[left], words[right] = words[right], words[left]
	}
	return []byte(strings.Join(words, " ")), nil
}

func init() {
	kit.Register(kit.Definition{Name: "Word-order reverser (Go)", Version: "1.0.0", New: func(kit.Host) (kit.Plugin, error) {
		return reverser{}, nil
	}})
}

func main() {}
