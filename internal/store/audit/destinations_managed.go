package audit

// The changes of the destinations an admin manages on the dashboard.
const (
	DestinationAdd    Action = "destination_add"    // an admin added a destination on the dashboard
	DestinationEdit   Action = "destination_edit"   // an admin changed one; the entry names the fields changed
	DestinationRemove Action = "destination_remove" // an admin removed one: retired while deliveries waited, deleted otherwise
)
