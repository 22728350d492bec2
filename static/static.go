// Package static holds the dashboard's stylesheet and its one script, htmx,
// embedded in the binary so it needs no CDN and nothing on disk.
package static

import "embed"

// FS serves as /static/: style.css and htmx.min.js (htmx 2, from the npm
// package htmx.org, unmodified).
//
//go:embed style.css htmx.min.js
var FS embed.FS
