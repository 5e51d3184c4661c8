-- A subject's events leave the outbox in the order they were written, even when the
-- queue refuses one of them.
--
-- The events queue is FIFO, grouped by subject, so it keeps the order in which it is
-- handed a subject's events. The relay hands them over in `seq` order, but a refused
-- event was retried after a backoff while the subject's later events went on, in the
-- same batch (SQS answers each entry of a batch on its own) or in the next ones.
--
-- A refused event now stalls its subject: a row here names the event (`head_seq`),
-- and the claim takes none of the subject's later events while it stands. It goes when
-- that event is published. Nothing is added to the hot path: the table holds only the
-- subjects with a refused event, and the claim probes it by primary key.
CREATE TABLE outbox_stalled_subjects (
    topic      text   NOT NULL,
    subject_id uuid   NOT NULL,
    head_seq   bigint NOT NULL,
    CONSTRAINT outbox_stalled_subjects_pkey PRIMARY KEY (topic, subject_id)
);
