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
  const { blobs, events, sessions } = tablesOf(schema)
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
    putBlob: `INSERT INTO ${blobs} (session_id, sha256, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
    presentBlobs: `SELECT sha256 FROM ${blobs} WHERE session_id = $1 AND sha256 = ANY($2::text[])`,
    deleteBlobs: `DELETE FROM ${blobs} WHERE session_id = $1 AND sha256 = ANY($2::text[])`,
    listBlobs: `SELECT sha256, octet_length(data) AS "storedBytes" FROM ${blobs} WHERE session_id = $1 ORDER BY sha256`,
    readBlob: `SELECT data FROM ${blobs} WHERE session_id = $1 AND sha256 = $2`,
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
      ), dropped_blobs AS (
        DELETE FROM ${blobs} WHERE session_id = $1
      ), dropped AS (
        DELETE FROM ${sessions} WHERE id = $1 RETURNING id, 0 AS head, '${Checkpointer.NO_GENERATION}' AS generation
      )
      SELECT ${notify("delete")} FROM dropped`,
    /** Sessions whose head disagrees with their events, events without a session, blobs whose bytes do not match their name. */
    integrity: [
      `SELECT 'session ' || s.id || ': head ' || s.head || ', but ' || count(e.seq) || ' events from seq ' ||
          coalesce(min(e.seq), 0) || ' to ' || coalesce(max(e.seq), 0) AS finding
        FROM ${sessions} s LEFT JOIN ${events} e ON e.session_id = s.id
        GROUP BY s.id, s.head
        HAVING count(e.seq) <> s.head OR coalesce(min(e.seq), 1) <> 1 OR coalesce(max(e.seq), 0) <> s.head`,
      `SELECT 'events of session ' || e.session_id || ' without a session row' AS finding
        FROM ${events} e WHERE NOT EXISTS (SELECT 1 FROM ${sessions} s WHERE s.id = e.session_id)
        GROUP BY e.session_id`,
      `SELECT 'snapshot ' || b.sha256 || ' of session ' || b.session_id || ': its bytes hash to ' ||
          encode(sha256(b.data), 'hex') AS finding
        FROM ${blobs} b WHERE encode(sha256(b.data), 'hex') <> b.sha256`
    ]
  }
}
