/**
 * The raw `pg` baseline: the statements and transaction the Postgres backend runs for a
 * single-event append — lock the session's row (creating it when missing), insert head+1 and
 * move the head with its notification in one statement, commit — on a pooled connection.
 */
import type pg from "pg"

export const rawPostgresAppender = (pool: pg.Pool, schema: string, sessionId: string) => {
  const lock = `SELECT head, generation::text AS generation FROM ${schema}.lite_agent_sessions WHERE id = $1 FOR UPDATE`
  const create = `INSERT INTO ${schema}.lite_agent_sessions (id, head, mtime, generation) VALUES ($1, 0, $2, 1) ON CONFLICT (id) DO NOTHING`
  const append = `WITH appended AS (
      INSERT INTO ${schema}.lite_agent_events (session_id, seq, ts, event)
      SELECT $1, r.seq, r.ts, r.event FROM unnest($2::bigint[], $3::bigint[], $4::text[]) AS r(seq, ts, event)
    ), moved AS (
      UPDATE ${schema}.lite_agent_sessions SET head = $5, mtime = $6 WHERE id = $1 RETURNING id, head, generation
    )
    SELECT pg_notify('lite_agent_changes', json_build_object('schema', '${schema}'::text, 'kind', 'append',
      'sessionId', id, 'head', head, 'generation', generation::text)::text) FROM moved`
  return async (eventJson: string) => {
    const client = await pool.connect()
    try {
      await client.query("BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = 5000")
      let locked = await client.query<{ head: string }>(lock, [sessionId])
      if (locked.rows.length === 0) {
        await client.query(create, [sessionId, Date.now()])
        locked = await client.query<{ head: string }>(lock, [sessionId])
      }
      const next = Number(locked.rows[0]!.head) + 1
      const now = Date.now()
      await client.query(append, [sessionId, [next], [now], [eventJson], next, now])
      await client.query("COMMIT")
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined)
      throw error
    } finally {
      client.release()
    }
  }
}
