import type { Kysely, Transaction } from 'kysely';
import type { DB } from './schema.ts';

/** A repo function accepts either the database or an open transaction. */
export type Executor = Kysely<DB> | Transaction<DB>;
