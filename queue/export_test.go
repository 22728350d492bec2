package queue

// Exported for the tests of package queue_test only.
var (
	ShortTx       = (*Store).shortTx
	TakeLeasesSQL = takeLeasesSQL
	ReclaimedSQL  = reclaimedSQL
	PendingSQL    = pending
)
