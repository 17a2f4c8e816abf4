package mcmdriver

import (
	"context"
	"errors"

	mcmcodes "github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	mcmstatus "github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"

	"github.com/mcmkit/mcm/driver"
)

// codePairs pairs every MCM machine code with ours. The numbers happen to
// agree (both follow gRPC's), but the table is spelled out so that a code
// added on either side shows up as a missing row in the tests instead of
// being passed through by number.
var codePairs = []struct {
	mcm  mcmcodes.Code
	ours driver.Code
}{
	{mcmcodes.OK, driver.OK},
	{mcmcodes.Canceled, driver.Canceled},
	{mcmcodes.Unknown, driver.Unknown},
	{mcmcodes.InvalidArgument, driver.InvalidArgument},
	{mcmcodes.DeadlineExceeded, driver.DeadlineExceeded},
	{mcmcodes.NotFound, driver.NotFound},
	{mcmcodes.AlreadyExists, driver.AlreadyExists},
	{mcmcodes.PermissionDenied, driver.PermissionDenied},
	{mcmcodes.ResourceExhausted, driver.ResourceExhausted},
	{mcmcodes.FailedPrecondition, driver.FailedPrecondition},
	{mcmcodes.Aborted, driver.Aborted},
	{mcmcodes.OutOfRange, driver.OutOfRange},
	{mcmcodes.Unimplemented, driver.Unimplemented},
	{mcmcodes.Internal, driver.Internal},
	{mcmcodes.Unavailable, driver.Unavailable},
	{mcmcodes.DataLoss, driver.DataLoss},
	{mcmcodes.Unauthenticated, driver.Unauthenticated},
	{mcmcodes.Uninitialized, driver.Uninitialized},
}

// CodeFromMCM returns our code for an MCM machine code. A number MCM does
// not define becomes Unknown, as an unclassified failure.
func CodeFromMCM(c mcmcodes.Code) driver.Code {
	for _, p := range codePairs {
		if p.mcm == c {
			return p.ours
		}
	}
	return driver.Unknown
}

// CodeToMCM returns MCM's machine code for one of ours. A number we do not
// define becomes MCM's Unknown.
func CodeToMCM(c driver.Code) mcmcodes.Code {
	for _, p := range codePairs {
		if p.ours == c {
			return p.mcm
		}
	}
	return mcmcodes.Unknown
}

// ErrorFromMCM turns an error of an MCM driver into one of ours:
//
//   - a *status.Status anywhere in the chain (a provider may wrap it with
//     %w) gives its code and message, and its cause as Cause;
//   - otherwise, a status that MCM's own status.FromError decodes from the
//     error's text (providers that flattened a status with %v or %s still
//     reach MCM's controller with their code, so they reach ours too);
//   - otherwise context.Canceled or context.DeadlineExceeded in the chain
//     give Canceled or DeadlineExceeded;
//   - anything else, and a status with code OK (which is no failure code),
//     becomes Internal with the error as Cause: MCM's controller cannot
//     decode such an error either and retries it at its medium or long
//     period, never at the short one Unknown would get here.
func ErrorFromMCM(err error) error {
	if err == nil {
		return nil
	}
	if s, ok := errors.AsType[*mcmstatus.Status](err); ok && s.Code() != mcmcodes.OK {
		return &driver.Error{Code: CodeFromMCM(s.Code()), Message: s.Message(), Cause: s.Cause()}
	}
	if s, ok := mcmstatus.FromError(err); ok && s.Code() != mcmcodes.OK {
		return &driver.Error{Code: CodeFromMCM(s.Code()), Message: s.Message()}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &driver.Error{Code: driver.Canceled, Cause: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &driver.Error{Code: driver.DeadlineExceeded, Cause: err}
	}
	return &driver.Error{Code: driver.Internal, Message: "the MCM driver returned an error without a machine code", Cause: err}
}

// ErrorToMCM turns one of our errors into the *status.Status an MCM
// controller expects: the code CodeOf finds, the error's text without the
// code's name as message, and err as cause.
func ErrorToMCM(err error) error {
	if err == nil {
		return nil
	}
	code := driver.CodeOf(err)
	return mcmstatus.WrapError(CodeToMCM(code), messageOf(err), err)
}

// messageOf is the text of err without the leading code name that
// driver.Error puts there, since MCM prints the code beside the message.
func messageOf(err error) string {
	e, ok := err.(*driver.Error)
	if !ok {
		return err.Error()
	}
	switch {
	case e.Cause == nil:
		return e.Message
	case e.Message == "":
		return e.Cause.Error()
	}
	return e.Message + ": " + e.Cause.Error()
}
