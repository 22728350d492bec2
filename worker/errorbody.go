package worker

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// errorBodyLen is how much of a failed answer's body goes into last_error:
// enough for a framework's error message, not a whole page.
const errorBodyLen = 200

// htmlErrorBodyLen is how much of a failed answer's body is read: a
// framework's HTML error page can hold kilobytes of styles before its
// message.
const htmlErrorBodyLen = 32 << 10

// errorBody is what last_error keeps of a failed answer's body, read from
// body: on one line (whitespace runs become one space, so it reads as one
// line in the dashboard and in logs), cut to errorBodyLen bytes with an
// ellipsis. An HTML
// page, such as a proxy's 502 or a framework's error page, is kept as the
// text a browser would show: its markup, styles and scripts would fill
// last_error before the message does, and split one cause into as many
// failure groups as there are page layouts.
func errorBody(contentType string, body io.Reader) string {
	head, _ := io.ReadAll(io.LimitReader(body, htmlErrorBodyLen))
	if isHTML(contentType, head) {
		return cutText(pageText(head), errorBodyLen)
	}
	return cutText(strings.Join(strings.Fields(string(head)), " "), errorBodyLen)
}

// isHTML says whether a body is an HTML page: as its Content-Type says,
// or, when it says none, as its first bytes show.
func isHTML(contentType string, head []byte) bool {
	if contentType == "" {
		contentType = http.DetectContentType(head)
	}
	media, _, err := mime.ParseMediaType(contentType)
	return err == nil && (media == "text/html" || media == "application/xhtml+xml")
}

// pageText is the text of an HTML page in its order (the title first),
// without what a browser does not show (scripts, styles), with whitespace
// runs as one space. A piece of text that repeats the one before it (a
// title shown again as the heading) is kept once.
func pageText(page []byte) string {
	z := html.NewTokenizer(bytes.NewReader(page))
	var pieces []string
	hidden := 0 // depth inside elements whose text is not shown
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.Join(pieces, " ")
		case html.StartTagToken:
			if name, _ := z.TagName(); hiddenText(atom.Lookup(name)) {
				hidden++
			}
		case html.EndTagToken:
			if name, _ := z.TagName(); hiddenText(atom.Lookup(name)) && hidden > 0 {
				hidden--
			}
		case html.TextToken:
			if hidden > 0 {
				continue
			}
			text := strings.Join(strings.Fields(string(z.Text())), " ")
			if text != "" && (len(pieces) == 0 || pieces[len(pieces)-1] != text) {
				pieces = append(pieces, text)
			}
		}
	}
}

// hiddenText says whether the text inside an element is not shown.
func hiddenText(a atom.Atom) bool {
	switch a {
	case atom.Script, atom.Style, atom.Template, atom.Noscript:
		return true
	}
	return false
}

// cutText is s cut to at most n bytes on a character's boundary, with an
// ellipsis when anything was cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
