package driver_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/driver"
)

// TestCodesMatchMCM pins every code's number and name to MCM's
// pkg/util/provider/machinecodes/codes, which status.lastOperation.errorCode
// and the cluster-autoscaler depend on.
func TestCodesMatchMCM(t *testing.T) {
	type entry struct {
		Number uint32
		Name   string
	}
	codes := []driver.Code{
		driver.OK, driver.Canceled, driver.Unknown, driver.InvalidArgument, driver.DeadlineExceeded,
		driver.NotFound, driver.AlreadyExists, driver.PermissionDenied, driver.ResourceExhausted,
		driver.FailedPrecondition, driver.Aborted, driver.OutOfRange, driver.Unimplemented,
		driver.Internal, driver.Unavailable, driver.DataLoss, driver.Unauthenticated, driver.Uninitialized,
	}
	var got []entry
	for _, c := range codes {
		got = append(got, entry{uint32(c), c.String()})
	}
	want := []entry{
		{0, "OK"}, {1, "Canceled"}, {2, "Unknown"}, {3, "InvalidArgument"}, {4, "DeadlineExceeded"},
		{5, "NotFound"}, {6, "AlreadyExists"}, {7, "PermissionDenied"}, {8, "ResourceExhausted"},
		{9, "FailedPrecondition"}, {10, "Aborted"}, {11, "OutOfRange"}, {12, "Unimplemented"},
		{13, "Internal"}, {14, "Unavailable"}, {15, "DataLoss"}, {16, "Unauthenticated"}, {17, "Uninitialized"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("codes differ from MCM's (-want +got):\n%s", diff)
	}
}

func TestCodeStringOfUnnamedNumber(t *testing.T) {
	if got, want := driver.Code(42).String(), "Code(42)"; got != want {
		t.Errorf("Code(42).String() = %q, want %q", got, want)
	}
}

func TestParseCodeRoundTrips(t *testing.T) {
	for c := driver.OK; c <= driver.Uninitialized; c++ {
		got, ok := driver.ParseCode(c.String())
		if !ok || got != c {
			t.Errorf("ParseCode(%q) = %v, %v; want %v, true", c.String(), got, ok, c)
		}
	}
	for _, s := range []string{"", "notfound", "NOTFOUND", "Code(42)", " NotFound"} {
		if got, ok := driver.ParseCode(s); ok {
			t.Errorf("ParseCode(%q) = %v, true; want false", s, got)
		}
	}
}
