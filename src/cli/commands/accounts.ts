import type { Command } from 'commander';
import { notFound } from '../../lib/errors.ts';
import { print, printLines, table, withContainer } from '../context.ts';

/**
 * Listing and removal for the operator: `tenants list`, `keys list|revoke`, `users list|delete`.
 * These read the tables directly (across tenants where asked): the API's list endpoints are per
 * tenant and paged, which suits a client, not a terminal.
 */
export function registerTenantListing(tenants: Command) {
  tenants
    .command('list')
    .description('List tenants')
    .option('--json', 'print JSON lines, one tenant per line')
    .action(async (opts: { json?: boolean }) => {
      await withContainer(async (c) => {
        const rows = await c.database.db
          .selectFrom('tenants')
          .select(['id', 'name', 'default_from', 'created_at'])
          .orderBy('id')
          .execute();
        if (opts.json) return printLines(rows);
        print(
          false,
          rows,
          table(
            rows.map((t) => [t.id, t.name, t.default_from ?? '', t.created_at]),
            ['ID', 'NAME', 'DEFAULT FROM', 'CREATED'],
            '(no tenants)',
          ),
        );
      });
    });
}

export function registerKeyCommands(keys: Command) {
  keys
    .command('list')
    .description("List a tenant's API keys (never the keys themselves: only their first characters)")
    .requiredOption('--tenant <id>', 'tenant id')
    .option('--revoked', 'include revoked keys')
    .option('--json', 'print JSON lines, one key per line')
    .action(async (opts: { tenant: string; revoked?: boolean; json?: boolean }) => {
      await withContainer(async (c) => {
        await c.tenants.get(opts.tenant);
        let q = c.database.db
          .selectFrom('api_keys')
          .select(['id', 'name', 'key_prefix', 'scopes', 'created_at', 'last_used_at', 'deleted_at'])
          .where('tenant_id', '=', opts.tenant);
        if (!opts.revoked) q = q.where('deleted_at', 'is', null);
        const rows = (await q.orderBy('id').execute()).map((k) => ({
          id: k.id,
          name: k.name,
          prefix: k.key_prefix,
          scopes: JSON.parse(k.scopes) as string[],
          created_at: k.created_at,
          last_used_at: k.last_used_at,
          revoked_at: k.deleted_at,
        }));
        if (opts.json) return printLines(rows);
        print(
          false,
          rows,
          table(
            rows.map((k) => [
              k.id,
              k.name,
              `${k.prefix}…`,
              k.last_used_at ?? 'never',
              k.revoked_at ? `revoked ${k.revoked_at}` : k.scopes.join(','),
            ]),
            ['ID', 'NAME', 'KEY', 'LAST USED', 'SCOPES'],
            '(no keys)',
          ),
        );
      });
    });
  keys
    .command('revoke')
    .description('Revoke an API key: it stops working on every node within POSTYARD_AUTH_CACHE_SECONDS')
    .requiredOption('--tenant <id>', 'tenant id')
    .requiredOption('--id <key id>', 'the key id (from `keys list`)')
    .option('--json', 'print JSON')
    .action(async (opts: { tenant: string; id: string; json?: boolean }) => {
      await withContainer(async (c) => {
        await c.apiKeys.delete(opts.tenant, opts.id, 'all');
        print(!!opts.json, { id: opts.id, revoked: true }, `revoked: ${opts.id}`);
      });
    });
}

export function registerUserCommands(users: Command) {
  users
    .command('list')
    .description('List dashboard users (of one tenant with --tenant)')
    .option('--tenant <id>', 'only this tenant')
    .option('--json', 'print JSON lines, one user per line')
    .action(async (opts: { tenant?: string; json?: boolean }) => {
      await withContainer(async (c) => {
        let q = c.database.db
          .selectFrom('dashboard_users')
          .select(['id', 'tenant_id', 'email', 'password_hash', 'created_at', 'last_login_at']);
        if (opts.tenant) q = q.where('tenant_id', '=', opts.tenant);
        const rows = (await q.orderBy('email').execute()).map(({ password_hash, ...u }) => ({
          ...u,
          has_password: password_hash !== null,
        }));
        if (opts.json) return printLines(rows);
        print(
          false,
          rows,
          table(
            rows.map((u) => [u.id, u.tenant_id, u.email, u.has_password ? 'yes' : 'no', u.last_login_at ?? 'never']),
            ['ID', 'TENANT', 'EMAIL', 'PASSWORD', 'LAST SIGN-IN'],
            '(no dashboard users)',
          ),
        );
      });
    });
  users
    .command('delete')
    .description('Delete a dashboard user; their sessions and sign-in links end at once')
    .requiredOption('--email <email>', 'the user')
    .option('--json', 'print JSON')
    .action(async (opts: { email: string; json?: boolean }) => {
      await withContainer(async (c) => {
        const user = await c.dashboard.findUserByEmail(opts.email);
        if (!user) throw notFound('Dashboard user');
        await c.database.db.transaction().execute(async (trx) => {
          await trx.deleteFrom('dashboard_sessions').where('user_id', '=', user.id).execute();
          await trx.deleteFrom('dashboard_login_links').where('user_id', '=', user.id).execute();
          await trx.deleteFrom('dashboard_users').where('id', '=', user.id).execute();
        });
        print(!!opts.json, { user_id: user.id, email: user.email, deleted: true }, `deleted: ${user.email}`);
      });
    });
}
