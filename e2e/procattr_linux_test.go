package e2e

import "syscall"

// hookdProcAttr ties each hookd to the test binary: when the binary dies
// without running its cleanups (a -timeout panic, a kill), the kernel stops
// hookd too instead of leaving it running against a kept database.
func hookdProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
