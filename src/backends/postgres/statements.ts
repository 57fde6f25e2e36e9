/** The SQL the driver runs, with the schema's name in it. */
import * as Checkpointer from "../../core/Checkpointer.js"
import { CHANGES_CHANNEL, type SessionChange } from "./changeFeed.js"

export const READ_PAGE_ROWS = 1000

export const quoteIdentifier = (name: string) => `"${name.replaceAll(`"`, `""`)}"`

const quoteLiteral = (text: string) => `'${text.replaceAll("'", "''")}'`

/** The schema's tables, schema-qualified and quoted. */
export const tablesOf = (schema: string) => {
  const s = quoteIdentifier(schema)
  return {
    sessions: `${s}.lite_agent_sessions`,
    events: `${s}.lite_agent_events`,
    /** The store's objects, shared by every session (schema version 2 on). */
    objects: `${s}.lite_agent_objects`,
    /** Version 1's snapshot store, one copy per session: named only for the migrations that create it and fold it into `objects`. */
    blobs: `${s}.lite_agent_blobs`,
    meta: `${s}.lite_agent_meta`
  }
}

/**
 * The change a statement's returned row (id, head, generation) describes, sent on commit; the
 * live feed (changeFeed.ts) parses this payload.
 */
const notifyChange = (schema: string, kind: SessionChange["kind"], records = "") =>
  `pg_notify('${CHANGES_CHANNEL}', json_build_object('schema', ${quoteLiteral(schema)}::text, 'kind', '${kind}',
       'sessionId', id, 'head', head, 'generation', generation::text${records})::text)`

export const statementsFor = (schema: string) => {
  const { events, objects, sessions } = tablesOf(schema)
  const notify = (kind: SessionChange["kind"], records?: string) => notifyChange(schema, kind, records)
  return {
    lockSession: `SELECT head, generation::text AS generation FROM ${sessions} WHERE id = $1 FOR UPDATE`,
    createSession: `INSERT INTO ${sessions} (id, head, mtime, generation) VALUES ($1, 0, $2, $3) ON CONFLICT (id) DO NOTHING`,
    /** $7: the records as JSON when they are small enough to travel with the notification (`carriedRecordsJson`), else null. */
    append: `WITH appended AS (
        INSERT INTO ${events} (session_id, seq, ts, event)
        SELECT $1, r.seq, r.ts, r.event FROM unnest($2::bigint[], $3::bigint[], $4::text[]) AS r(seq, ts, event)
      ), moved AS (
        UPDATE ${sessions} SET head = $5, mtime = $6 WHERE id = $1 RETURNING id, head, generation
      )
      SELECT ${notify("append", `, 'records', $7::json`)} FROM moved`,
    truncate: `WITH dropped AS (
        DELETE FROM ${events} WHERE session_id = $1 AND seq > $2
      ), moved AS (
        UPDATE ${sessions} SET head = $2, mtime = $3, generation = $4 WHERE id = $1 RETURNING id, head, generation
      )
      SELECT ${notify("truncate")} FROM moved`,
    /**
     * Store each object ($1 hashes, $2 bytes) not stored yet and touch ($3) those that are: a
     * touch never moves an object's time back. Concurrent puts of one object queue on its key and
     * both succeed. The caller passes each hash once (ON CONFLICT cannot change a row twice); rows
     * are locked in hash order, as `touchObjects` locks them.
     */
    putObjects: `INSERT INTO ${objects} AS o (sha256, data, touched_ms)
      SELECT p.sha256, p.data, $3::bigint FROM unnest($1::text[], $2::bytea[]) AS p(sha256, data) ORDER BY p.sha256
      ON CONFLICT (sha256) DO UPDATE SET touched_ms = GREATEST(o.touched_ms, EXCLUDED.touched_ms)`,
    /** Touch ($2) the stored objects among $1, locked in hash order; returns the hashes found. */
    touchObjects: `WITH found AS MATERIALIZED (
        SELECT sha256 FROM ${objects} WHERE sha256 = ANY($1::text[]) ORDER BY sha256 FOR UPDATE
      )
      UPDATE ${objects} o SET touched_ms = GREATEST(o.touched_ms, $2) FROM found WHERE o.sha256 = found.sha256
      RETURNING o.sha256`,
    readObject: `SELECT data FROM ${objects} WHERE sha256 = $1`,
    objectSizes: `SELECT sha256, octet_length(data) AS "storedBytes" FROM ${objects} WHERE sha256 = ANY($1::text[])`,
    listObjects: `SELECT sha256, octet_length(data) AS "storedBytes", touched_ms::text AS "touchedMs" FROM ${objects}`,
    /**
     * The objects among $1 whose touched time is still before $2, deleted; returns them. Atomic
     * with respect to put and touch under READ COMMITTED: a row changed by a put or touch that
     * committed after this statement began is re-checked in its committed version (FOR UPDATE)
     * and kept once touched. A row a put or touch holds right now is skipped, not waited for: it
     * is being touched, so it stays (and the delete never waits, nor deadlocks). A put waiting on
     * a row this deleted then stores it again; a touch reports it missing.
     */
    deleteUntouched: `WITH doomed AS MATERIALIZED (
        SELECT sha256 FROM ${objects} WHERE sha256 = ANY($1::text[]) AND touched_ms < $2 FOR UPDATE SKIP LOCKED
      )
      DELETE FROM ${objects} o USING doomed WHERE o.sha256 = doomed.sha256
      RETURNING o.sha256, octet_length(o.data) AS "storedBytes"`,
    allRecords: `SELECT seq, ts, event FROM ${events} WHERE session_id = $1 ORDER BY seq`,
    firstRecord: `SELECT seq, ts, event FROM ${events} WHERE session_id = $1 AND seq = 1`,
    // The session's row, with its events after $2 when there are any (one row without an event when not).
    readPage: `SELECT e.seq, e.ts, e.event, s.head, s.generation::text AS generation
      FROM ${sessions} s LEFT JOIN LATERAL (
        SELECT seq, ts, event FROM ${events} WHERE session_id = s.id AND seq > $2 ORDER BY seq LIMIT ${READ_PAGE_ROWS}
      ) e ON true
      WHERE s.id = $1 ORDER BY e.seq`,
    version: `SELECT head, generation::text AS generation FROM ${sessions} WHERE id = $1`,
    logBytes: `SELECT coalesce(sum(octet_length(event)), 0) AS bytes FROM ${events} WHERE session_id = $1`,
    list: `SELECT id, mtime FROM ${sessions}`,
    /** After `lockSession`: a statement taken before the lock could miss events committed while it waited. */
    deleteSession: `WITH dropped_events AS (
        DELETE FROM ${events} WHERE session_id = $1
      ), dropped AS (
        DELETE FROM ${sessions} WHERE id = $1 RETURNING id, 0 AS head, '${Checkpointer.NO_GENERATION}' AS generation
      )
      SELECT ${notify("delete")} FROM dropped`,
    /** Sessions whose head disagrees with their events, events without a session, objects whose bytes do not match their name. */
    integrity: [
      `SELECT 'session ' || s.id || ': head ' || s.head || ', but ' || count(e.seq) || ' events from seq ' ||
          coalesce(min(e.seq), 0) || ' to ' || coalesce(max(e.seq), 0) AS finding
        FROM ${sessions} s LEFT JOIN ${events} e ON e.session_id = s.id
        GROUP BY s.id, s.head
        HAVING count(e.seq) <> s.head OR coalesce(min(e.seq), 1) <> 1 OR coalesce(max(e.seq), 0) <> s.head`,
      `SELECT 'events of session ' || e.session_id || ' without a session row' AS finding
        FROM ${events} e WHERE NOT EXISTS (SELECT 1 FROM ${sessions} s WHERE s.id = e.session_id)
        GROUP BY e.session_id`,
      `SELECT 'object ' || o.sha256 || ': its bytes hash to ' || encode(sha256(o.data), 'hex') AS finding
        FROM ${objects} o WHERE encode(sha256(o.data), 'hex') <> o.sha256`
    ]
  }
}
