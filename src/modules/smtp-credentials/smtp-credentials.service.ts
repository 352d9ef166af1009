import type { Executor } from '../../db/executor.ts';
import { newestFirstPage } from '../../db/newest-first-page.ts';
import type { SmtpCredentialsTable } from '../../db/schema.ts';
import { nowIso } from '../../lib/clock.ts';
import { hashPassword, randomBase62, verifyPassword } from '../../lib/crypto.ts';
import { notFound, validationError } from '../../lib/errors.ts';
import { newId } from '../../lib/ids.ts';
import type { CursorCodec, Page } from '../../lib/pagination.ts';
import { deleteSmtpCredential, findActiveByUsername, insertSmtpCredential } from './smtp-credentials.repo.ts';

export interface SmtpCredentialView {
  id: string;
  name: string;
  username: string;
  created_at: string;
  last_used_at: string | null;
}

function toView(row: SmtpCredentialsTable): SmtpCredentialView {
  return {
    id: row.id,
    name: row.name,
    username: row.username,
    created_at: row.created_at,
    last_used_at: row.last_used_at,
  };
}

// A syntactically valid dummy hash so unknown usernames cost the same scrypt time as known ones.
const DUMMY_HASH = 'scrypt$32768$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=';

/** SMTP submission credentials: the password is shown once and stored as an scrypt hash. */
export class SmtpCredentialsService {
  constructor(
    private readonly db: Executor,
    private readonly cursors: CursorCodec,
  ) {}

  async create(
    tenantId: string,
    input: { name: unknown },
    db: Executor = this.db,
  ): Promise<SmtpCredentialView & { password: string }> {
    const name = typeof input.name === 'string' ? input.name.trim() : '';
    if (name.length < 1 || name.length > 200) {
      throw validationError([{ field: 'name', message: 'name must be 1-200 characters' }]);
    }
    const password = randomBase62(32);
    const row: SmtpCredentialsTable = {
      tenant_id: tenantId,
      id: newId(),
      name,
      username: `smtp_${randomBase62(20)}`,
      password_hash: await hashPassword(password),
      created_at: nowIso(),
      last_used_at: null,
      deleted_at: null,
    };
    await insertSmtpCredential(db, row);
    return { ...toView(row), password };
  }

  async list(tenantId: string, limit: number, cursor?: string): Promise<Page<SmtpCredentialView>> {
    return newestFirstPage(this.db, 'smtp_credentials', tenantId, { limit, cursor, cursors: this.cursors }, toView);
  }

  async delete(tenantId: string, id: string): Promise<void> {
    if (!(await deleteSmtpCredential(this.db, tenantId, id, nowIso()))) throw notFound('SMTP credential');
  }

  /** For the SMTP server's AUTH: the tenant and credential, or null. Constant work either way. */
  async verify(username: string, password: string): Promise<{ tenantId: string; credentialId: string } | null> {
    const row = await findActiveByUsername(this.db, username);
    const ok = await verifyPassword(password, row?.password_hash ?? DUMMY_HASH);
    if (!row || !ok) return null;
    // One write per successful AUTH (once per SMTP connection), not per message.
    await this.db
      .updateTable('smtp_credentials')
      .set({ last_used_at: nowIso() })
      .where('id', '=', row.id)
      .execute()
      .catch(() => {});
    return { tenantId: row.tenant_id, credentialId: row.id };
  }
}
