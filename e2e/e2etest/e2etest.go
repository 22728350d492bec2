// Package e2etest holds what the tests that watch hookd run share: the e2e
// suite, package main's tests of run, the load generator, and the worker
// tests that read a loop's log.
package e2etest

import (
	"bytes"
	"sync"
)

// SyncBuffer collects a running hookd's output: hookd writes it from its
// goroutines, or its process's stdout and stderr both, while the test
// reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Bytes returns a copy of everything written so far.
func (b *SyncBuffer) Bytes() []byte { return []byte(b.String()) }

// Reset forgets everything written so far.
func (b *SyncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}
