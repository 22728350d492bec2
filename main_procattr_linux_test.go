package main

import "syscall"

// childProcAttr ties a hookd the tests start as a process to the test
// binary: when the binary dies without running its cleanups (a -timeout
// panic, a kill), the kernel stops hookd too instead of leaving it running
// against a kept database.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
