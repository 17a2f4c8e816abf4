//go:build !linux

package controlplane

import "syscall"

// childAttributes has no parent-death signal outside Linux; Stop and the
// deferred cleanup of Main are the only guard there.
func childAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}
