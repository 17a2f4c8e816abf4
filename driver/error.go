package driver

import (
	"context"
	"errors"
	"fmt"
)

// Error is the error every driver operation returns: a Code the controller
// acts on, a Message for people, and optionally the Cause it wraps.
//
// Code travels as a typed field, never inside the text: wrap an *Error with
// fmt.Errorf("...: %w", err) as often as you like and CodeOf still finds it.
type Error struct {
	// Code classifies the failure. It decides what the controller does next.
	Code Code
	// Message describes the failure for people; it ends up in the
	// Machine's status.lastOperation.description. It may be empty if Cause
	// says it all.
	Message string
	// Cause is the underlying error, if any, for errors.Is and errors.As.
	Cause error
}

// Error renders "<Code>: <Message>: <Cause>", leaving out empty parts.
func (e *Error) Error() string {
	s := e.Code.String()
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the cause, so that errors.Is and errors.As see through e.
func (e *Error) Unwrap() error { return e.Cause }

// Is reports whether target is an *Error with e's code and neither a
// message nor a cause, so that a bare code can be tested anywhere in an
// error chain:
//
//	errors.Is(err, &driver.Error{Code: driver.NotFound})
//
// Prefer CodeOf for decisions: it looks at the outermost *Error only, which
// is the classification the driver chose. errors.Is also matches an inner
// error that the driver deliberately reclassified.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Cause == nil && t.Code == e.Code
}

// NewError returns an *Error with the code and message.
func NewError(code Code, message string) error {
	return &Error{Code: code, Message: message}
}

// Errorf returns an *Error with the code and a message formatted as
// fmt.Errorf does. If the format wraps errors with %w, the formatted error
// becomes the Cause, so errors.Is and errors.As find the wrapped errors;
// otherwise it becomes the Message.
//
//	return nil, driver.Errorf(driver.Unavailable, "describe instances of %s: %w", name, err)
func Errorf(code Code, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if wraps(err) {
		return &Error{Code: code, Cause: err}
	}
	return &Error{Code: code, Message: err.Error()}
}

func wraps(err error) bool {
	switch w := err.(type) {
	case interface{ Unwrap() error }:
		return w.Unwrap() != nil
	case interface{ Unwrap() []error }:
		return len(w.Unwrap()) > 0
	}
	return false
}

// CodeOf returns the code of err:
//
//   - OK for nil;
//   - the Code of the outermost *Error in err's chain;
//   - Canceled or DeadlineExceeded if err wraps context.Canceled or
//     context.DeadlineExceeded but no *Error;
//   - Unknown for anything else.
//
// It never looks at the error text.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	}
	return Unknown
}

// ContextError returns an *Error for ctx's error (Canceled or
// DeadlineExceeded, wrapping it), or nil if ctx is not done. Drivers call it
// before starting work and after waiting, so that an abandoned call returns
// quickly with the code the contract asks for.
func ContextError(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	code := Canceled
	if errors.Is(err, context.DeadlineExceeded) {
		code = DeadlineExceeded
	}
	return &Error{Code: code, Cause: err}
}
