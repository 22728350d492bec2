package stripeevent

import "time"

// ReceiverPath is where hookd receives Stripe's deliveries: the path its
// route serves, and the one a Stripe webhook endpoint's URL must end with.
const ReceiverPath = "/webhooks/stripe"

// RedeliveryWindow is how long Stripe retries a delivery that failed, in
// live mode: up to three days, after which it gives up on the event. The
// dedup markers must outlive it, and reconciliation looks back as far by
// default.
const RedeliveryWindow = 72 * time.Hour
