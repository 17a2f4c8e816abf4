package workqueue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAPIUnreachable(t *testing.T) {
	machines := schema.GroupResource{Group: "machine.sapcloud.io", Resource: "machines"}
	dial := func(errno syscall.Errno) error {
		return &url.Error{Op: "Get", URL: "https://api:6443", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}}
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused", fmt.Errorf("patching: %w", dial(syscall.ECONNREFUSED)), true},
		{"connection reset", fmt.Errorf("patching: %w", dial(syscall.ECONNRESET)), true},
		{"unexpected EOF", &url.Error{Op: "Get", URL: "https://api:6443", Err: io.ErrUnexpectedEOF}, true},
		{"client timeout", &url.Error{Op: "Get", URL: "https://api:6443", Err: context.DeadlineExceeded}, true},
		{"503", apierrors.NewServiceUnavailable("etcd is down"), true},
		{"504", apierrors.NewTimeoutError("etcd timed out", 1), true},
		{"server timeout", apierrors.NewServerTimeout(machines, "patch", 1), true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"conflict", apierrors.NewConflict(machines, "m", errors.New("modified")), false},
		{"not found", apierrors.NewNotFound(machines, "m"), false},
		{"forbidden", apierrors.NewForbidden(machines, "m", errors.New("no")), false},
		{"invalid", apierrors.NewBadRequest("bad"), false},
		{"a cloud error", errors.New("quota exceeded"), false},
	}
	for _, tc := range tests {
		if got := apiUnreachable(tc.err); got != tc.want {
			t.Errorf("%s: apiUnreachable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
