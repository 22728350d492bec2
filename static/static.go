// Package static holds the dashboard's stylesheet, its one script, htmx, and
// its icon, embedded in the binary so it needs no CDN and nothing on disk.
package static

import "embed"

// FS serves as /static/: style.css, htmx.min.js (htmx 2, from the npm
// package htmx.org, unmodified) and favicon.svg.
//
//go:embed style.css htmx.min.js favicon.svg
var FS embed.FS
