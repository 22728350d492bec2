package views

// The formatting helpers the pages call, which the tests of their output
// call directly.
var (
	ActionLabel = actionLabel
	Relative    = relative
	Shorten     = shorten
	Took        = took
)
