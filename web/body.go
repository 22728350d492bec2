package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/hookd/hookd/internal/telemetry"
)

// DefaultMaxBodyMemory is HOOKD_MAX_BODY_MEMORY's default, 32 MiB: room for
// 32 bodies of the default HOOKD_MAX_BODY, or for thousands of Stripe's
// events of a few KB, arriving at one moment. hookd's resident set is some
// 20 to 50 MB at rest, and an open connection costs about 20 KB besides
// its body (2,000 silent ones, opened three times over: under 100 MB); with
// the whole budget taken on top it stays under 150 MiB, so a flood of
// bodies cannot carry a replica to a small container's limit.
const DefaultMaxBodyMemory = 32 << 20

// bodyMemoryWait is how long a delivery waits for room for its body when
// the budget is taken, before it is refused: a real body holds its bytes
// for milliseconds, so a burst of them passes; Stripe waits far longer for
// an answer.
const bodyMemoryWait = time.Second

// bodyMemoryRetryAfter is the Retry-After, in seconds, of a delivery
// refused for want of memory: the budget frees as bodies finish arriving,
// and the server's read timeout (30 s) ends the slowest.
const bodyMemoryRetryAfter = "10"

// errBodyMemoryFull is a delivery that found no room for its body within
// bodyMemoryWait.
var errBodyMemoryFull = errors.New("too many webhook bodies are being read at once; deliver again later")

// A body is read in pieces: the first of minPiece, each next one as large
// as all before it, up to maxPiece. A body so holds at most about twice
// what has arrived, and a sender that has sent a byte holds minPiece.
const (
	minPiece = 1 << 10
	maxPiece = 16 << 10
	// pieceSizes counts the sizes from minPiece to maxPiece: 1, 2, 4, 8
	// and 16 KiB.
	pieceSizes = 5
)

// piecePools keep pieces of each size for the next bodies. A body is
// copied out of its pieces once it is complete, so the delivery, the queue
// and the rejection log, which may keep the payload after the answer,
// never see a pooled piece.
var piecePools [pieceSizes]sync.Pool

// poolOf returns the pool of pieces of size bytes, or nil: a last piece cut
// to the body's remaining length is not pooled.
func poolOf(size int) *sync.Pool {
	for i, s := 0, minPiece; i < pieceSizes; i, s = i+1, s*2 {
		if size == s {
			return &piecePools[i]
		}
	}
	return nil
}

func getPiece(size int) []byte {
	if pool := poolOf(size); pool != nil {
		if p, ok := pool.Get().(*[]byte); ok {
			return (*p)[:0]
		}
	}
	return make([]byte, 0, size)
}

func putPiece(p []byte) {
	if pool := poolOf(cap(p)); pool != nil {
		p = p[:0]
		pool.Put(&p)
	}
}

// bodyReader reads webhook bodies under one budget of memory, shared by
// every connection: the bytes held by the bodies being read never exceed
// it.
type bodyReader struct {
	maxBody int64
	budget  *semaphore.Weighted
	metrics *telemetry.Metrics
}

func newBodyReader(maxBody, maxMemory int64, metrics *telemetry.Metrics) *bodyReader {
	// A body of maxBody must fit, or it could never be read.
	return &bodyReader{maxBody: maxBody, budget: semaphore.NewWeighted(max(maxMemory, maxBody)), metrics: metrics}
}

// read reads req's body: all of it up to maxBody, or maxBody bytes of a
// larger one, which tooLarge reports. A body takes memory from the budget
// as it arrives, never as it is declared: until its first byte arrives it
// holds none, so a sender that declares a megabyte and sends nothing holds
// nothing. When the budget has no room the delivery waits up to
// bodyMemoryWait, then gets errBodyMemoryFull. On another error the part
// read so far is returned, for the rejection log.
func (br *bodyReader) read(req *http.Request) (payload []byte, tooLarge bool, err error) {
	declared := req.ContentLength >= 0
	limit := br.maxBody
	if declared && req.ContentLength <= br.maxBody {
		limit = req.ContentLength
	}
	tooLarge = declared && req.ContentLength > br.maxBody
	if limit == 0 {
		return []byte{}, false, nil
	}
	br.metrics.ReadingBodies(1)
	defer br.metrics.ReadingBodies(-1)
	b := &body{bodyReader: br, ctx: req.Context()}
	defer b.release()

	err = b.readFrom(req.Body, limit, declared)
	if errors.Is(err, errBodyMemoryFull) {
		return nil, false, err
	}
	if err == nil && !declared && b.size == limit {
		// Whether a body of unknown length goes on takes one byte more,
		// read apart: the budget never has to hold more than maxBody.
		var more [1]byte
		switch n, moreErr := io.ReadFull(req.Body, more[:]); {
		case n == 1:
			tooLarge = true
		case moreErr != io.EOF:
			err = moreErr
		}
	}
	return b.payload(), tooLarge, err
}

// body is one body being read: its pieces, each full but the last, and
// the memory they took from the budget.
type body struct {
	*bodyReader
	ctx     context.Context
	pieces  [][]byte
	size    int64
	charged int64
	// waiting bounds the delivery's whole wait for the budget, over all
	// its pieces; nil until it first has to wait.
	waiting     context.Context
	stopWaiting context.CancelFunc
}

// readFrom reads r up to limit bytes; declared says limit is the length
// the request declared, so ending sooner is an error.
func (b *body) readFrom(r io.Reader, limit int64, declared bool) error {
	// The first byte is read on its own, so that no piece is taken before
	// the body has begun to arrive.
	var first [1]byte
	if _, err := io.ReadFull(r, first[:]); err != nil {
		if err == io.EOF && declared {
			return io.ErrUnexpectedEOF
		}
		if err == io.EOF {
			return nil
		}
		return err
	}
	if err := b.grow(limit); err != nil {
		return err
	}
	b.pieces[0] = append(b.pieces[0], first[0])
	b.size = 1
	for b.size < limit {
		last := len(b.pieces) - 1
		if len(b.pieces[last]) == cap(b.pieces[last]) {
			if err := b.grow(limit); err != nil {
				return err
			}
			last++
		}
		p := b.pieces[last]
		n, err := r.Read(p[len(p):cap(p)])
		b.pieces[last] = p[:len(p)+n]
		b.size += int64(n)
		switch {
		case err == io.EOF && declared && b.size < limit:
			return io.ErrUnexpectedEOF
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
	}
	return nil
}

// grow takes the next piece, and its size from the budget.
func (b *body) grow(limit int64) error {
	size := int64(minPiece)
	for size < b.size && size < maxPiece {
		size *= 2
	}
	size = min(size, limit-b.size)
	if err := b.take(size); err != nil {
		return err
	}
	b.pieces = append(b.pieces, getPiece(int(size)))
	return nil
}

// take takes n bytes from the budget, waiting for them until bodyMemoryWait
// has passed since the delivery first had to wait.
func (b *body) take(n int64) error {
	if !b.budget.TryAcquire(n) {
		if b.waiting == nil {
			b.waiting, b.stopWaiting = context.WithTimeout(b.ctx, bodyMemoryWait)
		}
		if b.budget.Acquire(b.waiting, n) != nil {
			return errBodyMemoryFull
		}
	}
	b.charged += n
	b.metrics.HoldBodyMemory(n)
	return nil
}

// payload returns the body read so far in memory of its own: a single
// piece cut to the body's length is the payload itself, pooled pieces are
// copied out.
func (b *body) payload() []byte {
	if len(b.pieces) == 1 && poolOf(cap(b.pieces[0])) == nil {
		p := b.pieces[0]
		b.pieces = nil
		return p
	}
	p := make([]byte, 0, b.size)
	for _, piece := range b.pieces {
		p = append(p, piece...)
	}
	return p
}

// release gives the pieces back to their pools and their memory back to
// the budget.
func (b *body) release() {
	for _, p := range b.pieces {
		putPiece(p)
	}
	b.pieces = nil
	if b.charged > 0 {
		b.budget.Release(b.charged)
		b.metrics.HoldBodyMemory(-b.charged)
	}
	if b.stopWaiting != nil {
		b.stopWaiting()
	}
}
