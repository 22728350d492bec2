//go:build !linux

package e2e

import "syscall"

// hookdProcAttr has nothing to add where the kernel cannot stop a child
// with its parent; the tests' cleanups stop hookd.
func hookdProcAttr() *syscall.SysProcAttr { return nil }
