package queue

// DefaultDestination is the destination of every delivery made before hookd
// had several, and of the one app HOOKD_FORWARD_URL names.
const DefaultDestination = "default"

// DeliveryKey is the key a delivery of event eventID to destination goes
// by in the lease, suspect and fence tables, as hookd_delivery_key
// (00034_destinations.sql) computes it: the event id for the destination
// "default", so that a one-app hookd keys everything as it always did, and
// the event id, a slash and the destination for any other.
func DeliveryKey(eventID, destination string) string {
	if destination == "" || destination == DefaultDestination {
		return eventID
	}
	return eventID + "/" + destination
}

// deliveryKeySQL is DeliveryKey of the row r's event_id and destination.
func deliveryKeySQL(r string) string {
	return `hookd_delivery_key(` + r + `.event_id, ` + r + `.destination)`
}

// leaseKeySQL is the lease key of the queue row r (its lease_key column)
// in the database's collation, as a claim compares it with the keys of
// webhook_leases and webhook_suspects. lease_key is a "C" column
// (00034_destinations.sql) and theirs are the database's: compared as it
// is, the comparison takes "C", which their primary keys do not serve, so
// a claim read every lease for each due row, or planned to, and a plan
// that costly is compiled (JIT) at each run.
func leaseKeySQL(r string) string { return r + `.lease_key COLLATE "default"` }

// orDefault is destinations, or DefaultDestination alone when there are
// none.
func orDefault(destinations []string) []string {
	if len(destinations) == 0 {
		return []string{DefaultDestination}
	}
	return destinations
}
