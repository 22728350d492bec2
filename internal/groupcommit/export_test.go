package groupcommit

// MaxStalled is the bound on groups left running beside the next, which
// the tests of stalled groups reach.
const MaxStalled = maxStalled
