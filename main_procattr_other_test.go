//go:build !linux

package main

import "syscall"

// childProcAttr has nothing to add where the kernel cannot stop a child
// with its parent; the tests' cleanups stop hookd.
func childProcAttr() *syscall.SysProcAttr { return nil }
