package controlplane

import "syscall"

// childAttributes makes the kernel kill a component when the test binary
// dies, so an interrupted test run leaves no etcd or API server behind.
func childAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
