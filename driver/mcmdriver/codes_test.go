package mcmdriver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/mcmdriver"
)

// TestCodeMapping maps every MCM machine code to ours and back. The pairs
// are matched by name, as MCM and we spell them, so a code whose number
// differed on one side would be caught.
func TestCodeMapping(t *testing.T) {
	var got, want []string
	for c := codes.OK; c <= codes.Uninitialized; c++ {
		ours := mcmdriver.CodeFromMCM(c)
		got = append(got, fmt.Sprintf("%s -> %s -> %s", c, ours, mcmdriver.CodeToMCM(ours)))
		want = append(want, fmt.Sprintf("%s -> %s -> %s", c, c, c))
		if parsed, ok := driver.ParseCode(c.String()); !ok || parsed != ours {
			t.Errorf("MCM's %s maps to our %s, whose name is %q", c, ours, ours.String())
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("code mapping (-want +got):\n%s", diff)
	}
	if got := mcmdriver.CodeFromMCM(codes.Code(99)); got != driver.Unknown {
		t.Errorf("CodeFromMCM(99) = %s, want Unknown", got)
	}
	if got := mcmdriver.CodeToMCM(driver.Code(99)); got != codes.Unknown {
		t.Errorf("CodeToMCM(99) = %s, want Unknown", got)
	}
}

// errorView is what the tests compare of a *driver.Error.
type errorView struct {
	Code    driver.Code
	Message string
	Cause   string
}

func viewOf(t *testing.T, err error) *errorView {
	t.Helper()
	if err == nil {
		return nil
	}
	e, ok := err.(*driver.Error)
	if !ok {
		t.Fatalf("%T %v is not a *driver.Error", err, err)
	}
	v := &errorView{Code: e.Code, Message: e.Message}
	if e.Cause != nil {
		v.Cause = e.Cause.Error()
	}
	return v
}

func TestErrorFromMCM(t *testing.T) {
	cause := errors.New("quota of m5.large reached")
	for _, tc := range []struct {
		name string
		err  error
		want *errorView
	}{
		{"nil", nil, nil},
		{"status", status.Error(codes.ResourceExhausted, "no capacity"),
			&errorView{Code: driver.ResourceExhausted, Message: "no capacity"}},
		{"status with cause", status.WrapError(codes.Unavailable, "describe instances", cause),
			&errorView{Code: driver.Unavailable, Message: "describe instances", Cause: cause.Error()}},
		{"wrapped status", fmt.Errorf("create VM: %w", status.Error(codes.NotFound, "gone")),
			&errorView{Code: driver.NotFound, Message: "gone"}},
		{"status flattened to text", fmt.Errorf("create VM: %v", status.Error(codes.Unauthenticated, "bad key")),
			&errorView{Code: driver.Unauthenticated, Message: "bad key"}},
		{"uninitialized", status.Error(codes.Uninitialized, "VM i-1 needs init"),
			&errorView{Code: driver.Uninitialized, Message: "VM i-1 needs init"}},
		{"plain error", cause,
			&errorView{Code: driver.Internal, Message: "the MCM driver returned an error without a machine code", Cause: cause.Error()}},
		{"status with code OK", status.Error(codes.OK, "fine"),
			&errorView{Code: driver.Internal, Message: "the MCM driver returned an error without a machine code", Cause: "machine codes error: code = [OK] message = [fine]"}},
		{"canceled", fmt.Errorf("wait: %w", context.Canceled),
			&errorView{Code: driver.Canceled, Cause: "wait: context canceled"}},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded),
			&errorView{Code: driver.DeadlineExceeded, Cause: "wait: context deadline exceeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, viewOf(t, mcmdriver.ErrorFromMCM(tc.err))); diff != "" {
				t.Errorf("ErrorFromMCM(%v) (-want +got):\n%s", tc.err, diff)
			}
		})
	}
}

// TestErrorRoundTrip sends every code of ours through MCM's status and
// back: code and message survive, and the MCM side sees the code MCM's
// controller would act on.
func TestErrorRoundTrip(t *testing.T) {
	for c := driver.Canceled; c <= driver.Uninitialized; c++ {
		ours := driver.Errorf(c, "step %d: %w", int(c), errors.New("cloud said no"))
		toMCM := mcmdriver.ErrorToMCM(ours)
		s, ok := status.FromError(toMCM)
		if !ok || s.Code() != mcmdriver.CodeToMCM(c) {
			t.Errorf("%s: MCM sees %v (decoded %t), want code %s", c, toMCM, ok, mcmdriver.CodeToMCM(c))
		}
		// MCM's status has no Unwrap; its Cause is where ours is kept.
		if typed, _ := toMCM.(*status.Status); typed == nil || typed.Cause() != ours {
			t.Errorf("%s: the MCM error %v does not carry ours as its cause", c, toMCM)
		}
		back := viewOf(t, mcmdriver.ErrorFromMCM(toMCM))
		want := &errorView{Code: c, Message: fmt.Sprintf("step %d: cloud said no", int(c)), Cause: ours.Error()}
		if diff := cmp.Diff(want, back); diff != "" {
			t.Errorf("%s round trip (-want +got):\n%s", c, diff)
		}
	}
	if mcmdriver.ErrorToMCM(nil) != nil {
		t.Error("ErrorToMCM(nil) is not nil")
	}
	plain := errors.New("boom")
	if s, _ := status.FromError(mcmdriver.ErrorToMCM(plain)); s.Code() != codes.Unknown || s.Message() != "boom" {
		t.Errorf("a plain error reaches MCM as %s %q, want Unknown \"boom\"", s.Code(), s.Message())
	}
}
