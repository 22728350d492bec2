package queue

import (
	"context"
	"fmt"
)

// DeleteExpiredSessions deletes the dashboard sessions that have expired
// and returns how many. The sessions table is scs's pgxstore layout; expired
// rows are never read again, so without this they only accumulate.
func (s *Store) DeleteExpiredSessions(ctx context.Context) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE expiry < now()`)
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}
