package driver

import "strconv"

// Code classifies why a driver operation failed. The numbers and names are
// those of MCM's machine codes (which follow gRPC's), so that the names the
// controller writes to a Machine's status.lastOperation.errorCode mean the same
// to people, dashboards and the cluster-autoscaler as they do under MCM.
type Code uint32

// The codes, with what a driver means when it returns them. The section
// "Error codes" of the package documentation says which operation returns
// which code.
const (
	// OK is not an error. CodeOf(nil) returns OK; a driver never returns
	// an Error with this code.
	OK Code = 0
	// Canceled: the caller's context was canceled.
	Canceled Code = 1
	// Unknown: the failure could not be classified. Errors that are not an
	// *Error count as Unknown.
	Unknown Code = 2
	// InvalidArgument: the request can never succeed as it is, whatever the
	// state of the cloud: a malformed providerSpec, a missing secret key.
	InvalidArgument Code = 3
	// DeadlineExceeded: the caller's deadline passed. The operation may
	// still have taken effect.
	DeadlineExceeded Code = 4
	// NotFound: no VM backs the machine.
	NotFound Code = 5
	// AlreadyExists: a VM for the machine exists but does not match the
	// request (for example another zone), so it cannot be adopted.
	AlreadyExists Code = 6
	// PermissionDenied: the credentials are valid but not allowed to do this.
	PermissionDenied Code = 7
	// ResourceExhausted: a quota or the cloud's capacity is exhausted.
	ResourceExhausted Code = 8
	// FailedPrecondition: the cloud is not in a state that allows the
	// operation, and will not get there by retrying alone.
	FailedPrecondition Code = 9
	// Aborted: the operation lost a race (a conflict) and can be retried.
	Aborted Code = 10
	// OutOfRange: several VMs claim to back the machine.
	OutOfRange Code = 11
	// Unimplemented: the driver does not support the operation.
	Unimplemented Code = 12
	// Internal: an invariant of the driver or the cloud is broken.
	Internal Code = 13
	// Unavailable: the cloud API cannot be reached or is overloaded.
	Unavailable Code = 14
	// DataLoss: data was lost or corrupted beyond recovery.
	DataLoss Code = 15
	// Unauthenticated: the credentials are missing, malformed or rejected.
	Unauthenticated Code = 16
	// Uninitialized: the VM exists but InitializeMachine has not run on it
	// yet. Only GetMachineStatus returns it.
	Uninitialized Code = 17
)

// codeNames are spelled exactly as MCM spells them: they are written to
// status.lastOperation.errorCode and read by the cluster-autoscaler.
var codeNames = [...]string{
	OK:                 "OK",
	Canceled:           "Canceled",
	Unknown:            "Unknown",
	InvalidArgument:    "InvalidArgument",
	DeadlineExceeded:   "DeadlineExceeded",
	NotFound:           "NotFound",
	AlreadyExists:      "AlreadyExists",
	PermissionDenied:   "PermissionDenied",
	ResourceExhausted:  "ResourceExhausted",
	FailedPrecondition: "FailedPrecondition",
	Aborted:            "Aborted",
	OutOfRange:         "OutOfRange",
	Unimplemented:      "Unimplemented",
	Internal:           "Internal",
	Unavailable:        "Unavailable",
	DataLoss:           "DataLoss",
	Unauthenticated:    "Unauthenticated",
	Uninitialized:      "Uninitialized",
}

// String returns the code's name as MCM spells it, for example
// "ResourceExhausted", or "Code(42)" for a number without a name.
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Code(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// ParseCode returns the code whose String is name, so that a code stored in
// status.lastOperation.errorCode can be read back. The match is exact and
// case-sensitive; ok is false for any other string.
func ParseCode(name string) (code Code, ok bool) {
	for c, n := range codeNames {
		if n == name {
			return Code(c), true
		}
	}
	return Unknown, false
}
