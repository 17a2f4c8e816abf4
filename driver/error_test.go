package driver_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/driver"
)

func TestCodeOf(t *testing.T) {
	notFound := driver.NewError(driver.NotFound, "no VM")
	tests := []struct {
		name string
		err  error
		want driver.Code
	}{
		{"nil", nil, driver.OK},
		{"plain error", errors.New("boom"), driver.Unknown},
		{"typed", notFound, driver.NotFound},
		{"typed, wrapped by fmt", fmt.Errorf("status of m1: %w", notFound), driver.NotFound},
		{"typed, joined", errors.Join(errors.New("other"), notFound), driver.NotFound},
		{"outermost typed wins", driver.Errorf(driver.Internal, "lookup: %w", notFound), driver.Internal},
		{"context canceled", context.Canceled, driver.Canceled},
		{"context deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), driver.DeadlineExceeded},
		{"typed beats wrapped context error", driver.Errorf(driver.Unavailable, "api: %w", context.DeadlineExceeded), driver.Unavailable},
		{"text is never parsed", errors.New("NotFound: code = [NotFound]"), driver.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := driver.CodeOf(tt.err); got != tt.want {
				t.Errorf("CodeOf(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"code only", &driver.Error{Code: driver.Internal}, "Internal"},
		{"message", driver.NewError(driver.NotFound, "no VM for m1"), "NotFound: no VM for m1"},
		{"cause", &driver.Error{Code: driver.Unavailable, Cause: errors.New("dial tcp: refused")}, "Unavailable: dial tcp: refused"},
		{"message and cause", &driver.Error{Code: driver.Unavailable, Message: "describe", Cause: errors.New("refused")}, "Unavailable: describe: refused"},
		{"Errorf without %w", driver.Errorf(driver.InvalidArgument, "zone %q unknown", "z9"), `InvalidArgument: zone "z9" unknown`},
		{"Errorf with %w", driver.Errorf(driver.Unavailable, "run instance: %w", errors.New("throttled")), "Unavailable: run instance: throttled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorfKeepsCauseReachable(t *testing.T) {
	err := driver.Errorf(driver.Internal, "read state: %w", fs.ErrNotExist)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(%v, fs.ErrNotExist) = false, want true", err)
	}
	e, ok := errors.AsType[*driver.Error](err)
	if !ok {
		t.Fatalf("errors.As(%v, *driver.Error) = false", err)
	}
	if diff := cmp.Diff("", e.Message); diff != "" {
		t.Errorf("Message: the text lives in Cause when the format wraps (-want +got):\n%s", diff)
	}

	plain := driver.Errorf(driver.Internal, "no wrap %d", 1)
	if e, _ := errors.AsType[*driver.Error](plain); e.Cause != nil || e.Message != "no wrap 1" {
		t.Errorf("Errorf without %%w = %#v, want Message only", e)
	}
}

func TestErrorIsMatchesBareCode(t *testing.T) {
	err := fmt.Errorf("delete: %w", driver.Errorf(driver.Internal, "lookup: %w", driver.NewError(driver.NotFound, "gone")))
	tests := []struct {
		target error
		want   bool
	}{
		{&driver.Error{Code: driver.Internal}, true},
		{&driver.Error{Code: driver.NotFound}, true}, // inner errors match too
		{&driver.Error{Code: driver.Unavailable}, false},
		{&driver.Error{Code: driver.NotFound, Message: "other"}, false}, // not a bare code
	}
	for _, tt := range tests {
		if got := errors.Is(err, tt.target); got != tt.want {
			t.Errorf("errors.Is(err, %v) = %v, want %v", tt.target, got, tt.want)
		}
	}
}

func TestContextError(t *testing.T) {
	if err := driver.ContextError(context.Background()); err != nil {
		t.Errorf("ContextError(live ctx) = %v, want nil", err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithTimeout(context.Background(), -1)
	defer cancel2()

	got := []driver.Code{driver.CodeOf(driver.ContextError(canceled)), driver.CodeOf(driver.ContextError(expired))}
	if diff := cmp.Diff([]driver.Code{driver.Canceled, driver.DeadlineExceeded}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := driver.ContextError(canceled); !errors.Is(err, context.Canceled) {
		t.Errorf("ContextError(canceled) = %v, does not wrap context.Canceled", err)
	}
}
