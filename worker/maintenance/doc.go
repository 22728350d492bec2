// Package maintenance holds hookd serve's housekeeping on a schedule: the
// pruner, which deletes what has aged out, and the alerter, which posts
// when a condition starts and when it clears. Each runs on a
// startstop.Service (internal/startstop), as every long-running loop of
// hookd serve does, so that how a loop starts, ticks and stops is written
// once.
package maintenance
