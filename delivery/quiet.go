package delivery

import "github.com/engagement-scheduler/engagement"

// QuietHours are a daily span in which no message is sent
// (engagement.QuietHours: the daily job schedules the user's hour around
// them too).
type QuietHours = engagement.QuietHours

// ParseQuietHours reads "HH:MM-HH:MM" (engagement.ParseQuietHours).
func ParseQuietHours(s string) (QuietHours, error) { return engagement.ParseQuietHours(s) }
