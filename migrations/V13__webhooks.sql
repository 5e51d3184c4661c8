-- Webhooks: endpoints that admins register, and what the notifier has delivered to them.

CREATE TABLE webhook_endpoints (
    id          uuid        NOT NULL,
    url         text        NOT NULL,
    -- The HMAC key of the endpoint's signatures. Kept in the clear because the notifier
    -- signs with it; the API shows it once, in the answer to the POST that made it.
    secret      text        NOT NULL,
    -- Null: the events of every resource.
    resource_id uuid,
    event_types text[]      NOT NULL,
    created_by  text        NOT NULL,
    created_at  timestamptz NOT NULL,
    -- Deleted endpoints stay for their deliveries' sake; nothing is sent to them.
    deleted_at  timestamptz,
    CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_endpoints_resource_fkey FOREIGN KEY (resource_id) REFERENCES resources (id),
    CONSTRAINT webhook_endpoints_url_http CHECK (url ~ '^https?://' AND length(url) <= 2000),
    CONSTRAINT webhook_endpoints_event_types_not_empty CHECK (cardinality(event_types) >= 1),
    CONSTRAINT webhook_endpoints_secret_long CHECK (length(secret) >= 32)
);

-- The list, newest first, by keyset; and the notifier's look-up of live endpoints.
CREATE INDEX webhook_endpoints_created_idx ON webhook_endpoints (created_at DESC, id DESC) WHERE deleted_at IS NULL;

-- One row per event and endpoint that accepted it (a 2xx). A message delivered again
-- (a retry after another endpoint failed, a duplicate) goes only to the endpoints
-- without a row here.
CREATE TABLE webhook_deliveries (
    event_id     uuid        NOT NULL,
    endpoint_id  uuid        NOT NULL,
    status       integer     NOT NULL,
    delivered_at timestamptz NOT NULL,
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (event_id, endpoint_id),
    CONSTRAINT webhook_deliveries_endpoint_fkey FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id),
    CONSTRAINT webhook_deliveries_status_success CHECK (status BETWEEN 200 AND 299)
);

-- The retention purge of old deliveries, oldest first.
CREATE INDEX webhook_deliveries_delivered_idx ON webhook_deliveries (delivered_at);
-- The endpoint's foreign key, checked when an endpoint row changes.
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id);
