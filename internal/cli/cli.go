// Package cli is the hookd command line over /api/v1: events, failures,
// replay, pause and resume, and tokens list and revoke, against the hookd
// that HOOKD_API_URL names with the token HOOKD_API_TOKEN. Each prints a
// table for people or, with --json, the API's JSON, and exits 0 done, 1
// refused, 2 bad usage, 3 hookd unreachable or failing.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/web/api/apiclient"
)

// Exit codes of the commands.
const (
	ExitDone        = 0
	ExitRefused     = 1 // hookd refused the request: a 4xx other than 400
	ExitUsage       = 2 // the command, its flags or the request as given are wrong (a 400)
	ExitUnreachable = 3 // hookd could not be reached, or failed (a 5xx)
)

// Error is a command's failure with the exit code it means.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ExitCode is the code the process exits with.
func (e *Error) ExitCode() int { return e.Code }

func usageError(format string, a ...any) error {
	return &Error{Code: ExitUsage, Err: fmt.Errorf(format, a...)}
}

// command is one subcommand: its arguments after its name.
type command func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// dispatch runs the subcommand of group (events, failures, replay) that
// args name, or refuses with the group's usage.
func dispatch(ctx context.Context, group, usage string, subs map[string]command,
	args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError("%s", usage)
	}
	run, ok := subs[args[0]]
	if !ok {
		return usageError("unknown %s command %q\n%s", group, args[0], usage)
	}
	return run(ctx, args[1:], getenv, stdout, stderr)
}

// requestTimeout bounds each request to hookd.
const requestTimeout = 30 * time.Second

// Client calls one hookd's /api/v1.
type Client struct {
	api  *apiclient.Client
	base string
}

// NewClient returns the client of the hookd that HOOKD_API_URL names
// (its address, with or without /api/v1), authorized by HOOKD_API_TOKEN.
func NewClient(getenv func(string) string) (*Client, error) {
	raw, token := strings.TrimSpace(getenv("HOOKD_API_URL")), strings.TrimSpace(getenv("HOOKD_API_TOKEN"))
	if raw == "" {
		return nil, usageError("set HOOKD_API_URL to hookd's address (e.g. https://hookd.example.com) " +
			"and HOOKD_API_TOKEN to an API token (hookd tokens create makes one)")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError("HOOKD_API_URL %q is not an http(s) address like https://hookd.example.com", raw)
	}
	if token == "" {
		return nil, usageError("set HOOKD_API_TOKEN to an API token (hookd tokens create makes one)")
	}
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/api/v1") + "/api/v1"
	base := u.String()
	c, err := apiclient.NewClient(base, apiclient.WithHTTPClient(&http.Client{Timeout: requestTimeout}),
		apiclient.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			r.Header.Set("User-Agent", "hookd-cli")
			return nil
		}))
	if err != nil {
		return nil, usageError("HOOKD_API_URL: %v", err)
	}
	return &Client{api: c, base: base}, nil
}

// read reads the answer to a request that res and err are, and returns
// its body when hookd did what was asked (a 2xx); else an *Error with the
// problem hookd answered, or why it could not be asked.
func (c *Client) read(res *http.Response, err error) ([]byte, error) {
	if err != nil {
		return nil, &Error{Code: ExitUnreachable, Err: fmt.Errorf("cannot reach hookd at %s: %w", c.base, unwrapURL(err))}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, &Error{Code: ExitUnreachable, Err: fmt.Errorf("reading hookd's answer from %s: %w", c.base, err)}
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		return body, nil
	}
	return nil, refusal(c.base, res, body)
}

// unwrapURL drops net/http's "Get URL:" wrapping, which the message
// already says.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// refusal is the *Error of an answer that is not a 2xx: its problem's
// detail and field problems, or, when it is no problem of hookd's, what
// came back.
func refusal(base string, res *http.Response, body []byte) error {
	code := ExitRefused
	switch {
	case res.StatusCode == http.StatusBadRequest:
		code = ExitUsage
	case res.StatusCode >= 500:
		code = ExitUnreachable
	}
	var p apiclient.Problem
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") && json.Unmarshal(body, &p) == nil && p.Detail != "" {
		msg := fmt.Sprintf("%d %s: %s", res.StatusCode, http.StatusText(res.StatusCode), p.Detail)
		if p.Errors != nil {
			for _, f := range *p.Errors {
				if f.Detail != p.Detail {
					msg += "\n  " + f.Field + ": " + strings.TrimPrefix(f.Detail, f.Field+": ")
				}
			}
		}
		if after := res.Header.Get("Retry-After"); after != "" && res.StatusCode == http.StatusTooManyRequests {
			msg += " (retry after " + after + "s)"
		}
		return &Error{Code: code, Err: errors.New(msg)}
	}
	snippet := strings.TrimSpace(string(body))
	if len(snippet) > 200 {
		snippet = snippet[:200] + "..."
	}
	return &Error{Code: code, Err: fmt.Errorf("%s answered %s, not a problem of hookd's API (is HOOKD_API_URL hookd's address?): %s",
		base, res.Status, snippet)}
}

// decode reads body, a 2xx's, into v.
func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return &Error{Code: ExitUnreachable, Err: fmt.Errorf("hookd's answer is not the API's JSON: %w", err)}
	}
	return nil
}

// flagSet is a command's flags, for `hookd cmd`; -h prints about and
// them.
func flagSet(cmd, about string, stderr io.Writer) *flag.FlagSet {
	return config.NewFlagSet(cmd, about+"\n\nNeeds HOOKD_API_URL (hookd's address) and HOOKD_API_TOKEN (an API token).", stderr)
}

// parse parses args with fs, with at least min and at most max arguments
// besides the flags (max < 0: any number), flags allowed after them too.
func parse(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &Error{Code: ExitUsage, Err: err}
		}
		if fs.NArg() == 0 {
			break
		}
		rest, args = append(rest, fs.Arg(0)), fs.Args()[1:]
	}
	switch {
	case len(rest) < min:
		fs.Usage()
		return nil, usageError("%s needs %d argument(s), got %d", fs.Name(), min, len(rest))
	case max >= 0 && len(rest) > max:
		fs.Usage()
		return nil, usageError("%s takes at most %d argument(s), got %d: %s", fs.Name(), max, len(rest), strings.Join(rest, " "))
	}
	return rest, nil
}

// printJSON writes body, the API's JSON, as it came.
func printJSON(w io.Writer, body []byte) error {
	_, err := fmt.Fprintln(w, strings.TrimSpace(string(body)))
	return err
}

// when writes a moment as the tables show it.
func when(at *time.Time, none string) string {
	if at == nil || at.IsZero() {
		return none
	}
	return at.UTC().Format("2006-01-02 15:04:05")
}

// clip shortens s to n characters on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// opt is s as an optional parameter: nil when empty.
func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
