-- A webhook endpoint's signing secret can be rotated without a gap: the old secret
-- keeps signing beside the new one (two `v1=` in `Webhook-Signature`) until
-- `previous_secret_expires_at`, so a receiver can switch to the new secret whenever it
-- is ready within that window.
ALTER TABLE webhook_endpoints
    ADD COLUMN previous_secret text,
    ADD COLUMN previous_secret_expires_at timestamptz,
    ADD CONSTRAINT webhook_endpoints_previous_secret_with_expiry
        CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL));
