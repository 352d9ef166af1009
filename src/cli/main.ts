import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { ALL_ROLES, type Config, ConfigError, type Role } from '../config.ts';
import { AppError, validationError } from '../lib/errors.ts';
import { SCOPES } from '../modules/api-keys/scopes.ts';
import type { RateLimitPatch } from '../modules/tenants/rate-limits.ts';
import { registerKeyCommands, registerTenantListing, registerUserCommands } from './commands/accounts.ts';
import { registerAddressCommands } from './commands/addresses.ts';
import { registerDoctor } from './commands/doctor.ts';
import { config, packageVersion, print, withContainer } from './context.ts';

/**
 * The `postyard` command. Exit codes: 0 ok, 1 bad configuration or runtime failure,
 * 2 wrong arguments (one clear line on stderr).
 *
 * Only commander and a few small modules load up front: each command's action imports what it
 * needs (the server, the database layer, the doctor's checks) when it runs, so `--help`, a usage
 * error or `--version` answer without loading Fastify, Kysely or pino (bench/cli-start.ts).
 */
function parseRoles(value: string): Role[] {
  const roles = value
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  for (const r of roles) {
    if (!(ALL_ROLES as readonly string[]).includes(r)) {
      throw new InvalidArgumentError(`unknown role "${r}" (choose from ${ALL_ROLES.join(', ')})`);
    }
  }
  if (roles.length === 0) throw new InvalidArgumentError('at least one role is required');
  return roles as Role[];
}

function parseScopes(value: string): string[] {
  const scopes = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (scopes.length === 1 && scopes[0] === 'all') return [...SCOPES];
  for (const s of scopes) {
    if (!(SCOPES as readonly string[]).includes(s)) {
      throw new InvalidArgumentError(`unknown scope "${s}" (choose from ${SCOPES.join(', ')}, or all)`);
    }
  }
  return scopes;
}

export function buildCli(): Command {
  const program = new Command('postyard')
    .description('Postyard: self-hosted email sending service')
    .version(packageVersion(), '-V, --version', 'print the version and exit')
    .exitOverride()
    .showSuggestionAfterError(true)
    .configureOutput({
      outputError: (str, write) => write(str.split('\n')[0] ? `${str.split('\n')[0]}\n` : str),
    });

  program
    .command('start')
    .description('Run the service (all roles by default) with migrations applied first')
    .addOption(
      new Option('--roles <roles>', `comma-separated roles: ${ALL_ROLES.join(',')}`)
        .argParser(parseRoles)
        .default([...ALL_ROLES], ALL_ROLES.join(',')),
    )
    .action(async (opts: { roles: Role[] }) => {
      const cfg = config();
      const [{ createLogger, wantsPrettyLogs }, { createContainer }, { installShutdown, startRoles }] =
        await Promise.all([import('../logger.ts'), import('../container.ts'), import('../roles.ts')]);
      const logger = createLogger(cfg.logLevel, undefined, {
        pretty: wantsPrettyLogs(cfg.logFormat, process.stdout.isTTY === true),
      });
      const c = await createContainer(cfg, logger);
      logger.info({ roles: opts.roles, database: c.database.dialect }, 'starting postyard');
      const running = await startRoles(c, opts.roles);
      installShutdown(c, running);
    });

  program
    .command('migrate')
    .description('Apply database migrations and exit')
    .action(async () => {
      const cfg = config();
      const { migrateToLatest, openDatabase } = await import('../db/index.ts');
      const database = openDatabase({ databaseUrl: cfg.databaseUrl, dataDir: cfg.dataDir });
      try {
        const applied = await migrateToLatest(database);
        process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n');
      } finally {
        await database.close();
      }
    });

  const tenants = program.command('tenants').description('Manage tenants');
  tenants
    .command('create')
    .description('Create a tenant and print its first API key (holding every scope) once')
    .requiredOption('--name <name>', 'tenant name')
    .option('--from <address>', 'default sender, e.g. "Acme <noreply@acme.test>"')
    .option('--json', 'print JSON: {"tenant_id","api_key"}')
    .action(async (opts: { name: string; from?: string; json?: boolean }) => {
      await withContainer(async (c) => {
        const t = await c.tenants.create({ name: opts.name, from: opts.from });
        print(
          !!opts.json,
          { tenant_id: t.tenant_id, api_key: t.api_key },
          `tenant_id: ${t.tenant_id}\napi_key:   ${t.api_key}\n(the key is shown once; store it now)`,
        );
      });
    });

  // "default" puts a limit back to the configured value; 0 means no limit.
  // (commander turns a parser's null into '', so "default" stays a string until the action.)
  const limitArg = (value: string): number | 'default' => {
    if (value === 'default') return value;
    if (!/^\d+$/.test(value)) throw new InvalidArgumentError('a whole number, or "default"');
    return Number(value);
  };
  tenants
    .command('set-limits')
    .description("Set a tenant's API rate limits: per key, and for all its keys together (0 = none)")
    .requiredOption('--tenant <id>', 'tenant id')
    .option('--key-rps <n>', 'requests/s per API key ("default": POSTYARD_RATE_LIMIT_RPS)', limitArg)
    .option('--key-burst <n>', 'burst per API key ("default": POSTYARD_RATE_LIMIT_BURST)', limitArg)
    .option('--tenant-rps <n>', 'requests/s of all keys together ("default": POSTYARD_TENANT_RATE_LIMIT_RPS)', limitArg)
    .option('--tenant-burst <n>', 'burst of all keys together ("default": POSTYARD_TENANT_RATE_LIMIT_BURST)', limitArg)
    .option('--json', 'print JSON')
    .action(async (opts: { tenant: string; json?: boolean } & Record<keyof RateLimitPatch, number | 'default'>) => {
      await withContainer(async (c) => {
        const { tenant, json, ...given } = opts;
        const patch: RateLimitPatch = {};
        for (const [k, v] of Object.entries(given)) patch[k as keyof RateLimitPatch] = v === 'default' ? null : v;
        const { setTenantRateLimits } = await import('../modules/tenants/rate-limits.ts');
        const row = await setTenantRateLimits(c.database, tenant, patch);
        const show = (v: number | null | undefined) => (v === null || v === undefined ? 'default' : String(v));
        print(
          !!json,
          row,
          `per key:    ${show(row.rate_limit_rps)} rps, burst ${show(row.rate_limit_burst)}\n` +
            `per tenant: ${show(row.tenant_rate_limit_rps)} rps, burst ${show(row.tenant_rate_limit_burst)}`,
        );
      });
    });

  registerTenantListing(tenants);

  const keys = program.command('keys').description('Manage API keys');
  registerKeyCommands(keys);
  keys
    .command('create')
    .description('Create an API key for a tenant and print it once')
    .requiredOption('--tenant <id>', 'tenant id')
    .requiredOption('--name <name>', 'key name')
    .requiredOption('--scopes <scopes>', `comma-separated scopes, or "all"`, parseScopes)
    .option('--json', 'print JSON')
    .action(async (opts: { tenant: string; name: string; scopes: string[]; json?: boolean }) => {
      await withContainer(async (c) => {
        await c.tenants.get(opts.tenant);
        const k = await c.apiKeys.create(opts.tenant, { name: opts.name, scopes: opts.scopes }, 'all');
        print(!!opts.json, { id: k.id, key: k.key, scopes: k.scopes }, `id:  ${k.id}\nkey: ${k.key}\n(shown once)`);
      });
    });

  const users = program.command('users').description('Manage dashboard users (the web portal)');
  const linkUrl = (cfg: Config, base: string | undefined, token: string) => {
    const host = ['0.0.0.0', '::', ''].includes(cfg.httpHost) ? '127.0.0.1' : cfg.httpHost;
    const origin = (base ?? `http://${host.includes(':') ? `[${host}]` : host}:${cfg.httpPort}`).replace(/\/+$/, '');
    // The token travels in the fragment: browsers never send it to the server or in a Referer.
    return `${origin}/login#token=${token}`;
  };
  users
    .command('create')
    .description(
      'Create a dashboard user of a tenant; with --password-stdin it gets a password, else a one-time sign-in link is printed',
    )
    .requiredOption('--tenant <id>', 'tenant id')
    .requiredOption('--email <email>', 'sign-in email (unique)')
    .option(
      '--password-stdin',
      'read the initial password (at least 8 characters) from stdin: asked for without echo on a terminal, else the first line piped in',
    )
    // Refused: a password in the arguments is shown to every local user by `ps`.
    .addOption(new Option('--password [password]').hideHelp())
    .option('--base-url <url>', 'public address of the dashboard for the link (default: from POSTYARD_HTTP_HOST/PORT)')
    .option('--json', 'print JSON')
    .action(
      async (opts: {
        tenant: string;
        email: string;
        password?: string | boolean;
        passwordStdin?: boolean;
        baseUrl?: string;
        json?: boolean;
      }) => {
        if (opts.password !== undefined) {
          throw validationError([
            {
              field: '--password',
              message:
                'a password in the arguments is visible to other users in the process list; use --password-stdin (prompts on a terminal, or reads the first line piped in)',
            },
          ]);
        }
        let password: string | undefined;
        if (opts.passwordStdin) {
          const { PasswordInputError, readPassword } = await import('./read-password.ts');
          try {
            password = await readPassword();
          } catch (err) {
            if (err instanceof PasswordInputError)
              throw validationError([{ field: '--password-stdin', message: err.message }]);
            throw err;
          }
        }
        await withContainer(async (c) => {
          const user = await c.dashboard.createUser(opts.tenant, {
            email: opts.email,
            ...(password !== undefined ? { password } : {}),
          });
          if (password !== undefined) {
            print(!!opts.json, { user_id: user.id, email: user.email }, `user_id: ${user.id}\nemail:   ${user.email}`);
            return;
          }
          const link = await c.dashboard.createLoginLink(user.email);
          const url = linkUrl(c.config, opts.baseUrl, link.token);
          print(
            !!opts.json,
            { user_id: user.id, email: user.email, login_url: url, expires_at: link.expires_at },
            `user_id: ${user.id}\nemail:   ${user.email}\nsign in: ${url}\n(one-time link, valid until ${link.expires_at}; set a password after signing in)`,
          );
        });
      },
    );
  users
    .command('link')
    .description('Print a new one-time sign-in link for a dashboard user (e.g. after a forgotten password)')
    .requiredOption('--email <email>', 'the user')
    .option('--base-url <url>', 'public address of the dashboard for the link')
    .option('--json', 'print JSON')
    .action(async (opts: { email: string; baseUrl?: string; json?: boolean }) => {
      await withContainer(async (c) => {
        const link = await c.dashboard.createLoginLink(opts.email);
        const url = linkUrl(c.config, opts.baseUrl, link.token);
        print(
          !!opts.json,
          { login_url: url, expires_at: link.expires_at },
          `sign in: ${url}\n(one-time link, valid until ${link.expires_at})`,
        );
      });
    });

  registerUserCommands(users);
  registerAddressCommands(program);
  registerDoctor(program);

  return program;
}

async function main(argv: string[]) {
  const program = buildCli();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // help and version are not errors; everything else commander raises is a usage error.
      process.exit(err.exitCode === 0 ? 0 : 2);
    }
    if (err instanceof ConfigError) {
      process.stderr.write(`postyard: configuration error: ${err.message}\n`);
      process.exit(1);
    }
    if (err instanceof AppError) {
      const detail = err.details.map((d) => (d.field ? `${d.field}: ${d.message}` : d.message)).join('; ');
      process.stderr.write(`postyard: ${detail}\n`);
      process.exit(err.code === 'validation_failed' || err.code === 'not_found' ? 2 : 1);
    }
    process.stderr.write(`postyard: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}

await main(process.argv);
