package kit

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorsKeepTheirCodeAndMessage(t *testing.T) {
	err := &Error{Code: 7, Message: "asked to fail"}
	if err.Error() != "asked to fail (code 7)" {
		t.Fatalf("Error() = %q", err.Error())
	}
	wrapped := fmt.Errorf("handling: %w", err)
	var found *Error
	if !errors.As(wrapped, &found) || found.Code != 7 {
		t.Fatalf("a wrapped *Error is not found with its code: %v", wrapped)
	}
	if made := Errorf("no %s", "state"); made.Code != 1 || made.Message != "no state" {
		t.Fatalf("Errorf = %+v", made)
	}
}

func TestAskErrorsTellAClosedConnection(t *testing.T) {
	closed := &AskError{Status: errnoConnectionReset, Message: "the connection is closed"}
	if !closed.Closed() {
		t.Fatal("ECONNRESET is a closed connection")
	}
	if (&AskError{Status: errnoNotSupported}).Closed() {
		t.Fatal("ENOTSUP is not a closed connection")
	}
	if closed.Error() != "the connection is closed (errno 104)" {
		t.Fatalf("Error() = %q", closed.Error())
	}
}

func TestRegisterKeepsTheLastDefinition(t *testing.T) {
	Register(Definition{Name: "first"})
	Register(Definition{Name: "second", Concurrency: 3})
	if definition := definition(); definition == nil || definition.Name != "second" || definition.Concurrency != 3 {
		t.Fatalf("definition() = %+v", definition)
	}
}
