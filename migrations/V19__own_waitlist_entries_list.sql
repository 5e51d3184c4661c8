-- `GET /v1/waitlist`: a principal's own waitlist entries, newest first, by keyset on
-- (created_at, id) within the owner's rows. Joining a waitlist pays one more btree
-- entry; holds do not.
CREATE INDEX waitlist_entries_owner_created_idx ON waitlist_entries (owner, created_at DESC, id DESC);
