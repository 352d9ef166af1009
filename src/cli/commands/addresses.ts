import { type Command, InvalidArgumentError } from 'commander';
import { validationError } from '../../lib/errors.ts';
import type { AddressListing, OperatorWarmupInput } from '../../modules/ip-pools/source-addresses.ts';
import { print, printLines, table, withContainer } from '../context.ts';

/**
 * `postyard addresses list|dedicate|share|warmup`: the operator's source addresses
 * (docs/ip-pools.md "For the operator"). Each configured address is shared (the default) or
 * dedicated to one tenant; a shared address's warmup is the operator's schedule.
 */
export function registerAddressCommands(program: Command) {
  const addresses = program
    .command('addresses')
    .description('Source addresses (POSTYARD_SOURCE_ADDRESSES): shared or dedicated to a tenant, and their warmup');

  addresses
    .command('list')
    .description('List the source addresses: shared or dedicated (to whom), whose warmup holds, the pools holding them')
    .option('--json', 'print JSON lines, one address per line')
    .action(async (opts: { json?: boolean }) => {
      await withContainer(async (c) => {
        const rows = await c.sourceAddresses.list();
        if (opts.json) return printLines(rows);
        print(
          false,
          rows,
          table(
            rows.map((r) => [r.address, statusText(r), warmupText(r), poolsText(r)]),
            ['ADDRESS', 'STATUS', 'WARMUP', 'POOLS'],
            '(no source addresses: set POSTYARD_SOURCE_ADDRESSES)',
          ),
        );
      });
    });

  addresses
    .command('dedicate')
    .description(
      "Dedicate an address to one tenant: only its pools may hold it, and other tenants' pools holding it skip it",
    )
    .requiredOption('--address <address>', 'one of POSTYARD_SOURCE_ADDRESSES')
    .requiredOption('--tenant <id>', 'tenant id')
    .option('--json', 'print JSON')
    .action(async (opts: { address: string; tenant: string; json?: boolean }) => {
      await withContainer(async (c) => {
        const line = await c.sourceAddresses.dedicate(opts.address, opts.tenant);
        print(!!opts.json, line, changedText(line));
      });
    });

  addresses
    .command('share')
    .description('Make an address shared again: every tenant may hold it in its pools')
    .requiredOption('--address <address>', 'one of POSTYARD_SOURCE_ADDRESSES')
    .option('--json', 'print JSON')
    .action(async (opts: { address: string; json?: boolean }) => {
      await withContainer(async (c) => {
        const line = await c.sourceAddresses.share(opts.address);
        print(!!opts.json, line, changedText(line));
      });
    });

  addresses
    .command('warmup')
    .description(
      "Set the operator's warmup schedule of an address (it holds for a shared address, and for a dedicated one whose tenant attaches no policy), or take it off",
    )
    .requiredOption('--address <address>', 'one of POSTYARD_SOURCE_ADDRESSES')
    .option('--stages <list>', 'day:daily_limit[:hourly_limit],... e.g. 1:200,2:500:100,5:2000', parseStages)
    .option('--max-bounce-rate <fraction>', 'a day with more bounces/sends keeps the stage', parseRate)
    .option('--max-complaint-rate <fraction>', 'a day with more complaints/sends keeps the stage', parseRate)
    .option('--off', 'take the schedule off')
    .option('--json', 'print JSON')
    .action(
      async (opts: {
        address: string;
        stages?: OperatorWarmupInput['stages'];
        maxBounceRate?: number;
        maxComplaintRate?: number;
        off?: boolean;
        json?: boolean;
      }) => {
        let input: OperatorWarmupInput | null = null;
        if (opts.off) {
          if (opts.stages || opts.maxBounceRate !== undefined || opts.maxComplaintRate !== undefined)
            throw validationError([{ field: '--off', message: 'takes no --stages or rates' }]);
        } else {
          if (!opts.stages || opts.maxBounceRate === undefined || opts.maxComplaintRate === undefined)
            throw validationError([
              { field: '--stages', message: 'give --stages, --max-bounce-rate and --max-complaint-rate, or --off' },
            ]);
          input = {
            stages: opts.stages,
            max_bounce_rate: opts.maxBounceRate,
            max_complaint_rate: opts.maxComplaintRate,
          };
        }
        await withContainer(async (c) => {
          const line = await c.sourceAddresses.setWarmup(opts.address, input);
          print(!!opts.json, line, changedText(line));
        });
      },
    );
}

/** `1:200,2:500:100` -> stages; a malformed entry is a usage error naming it. */
function parseStages(value: string): OperatorWarmupInput['stages'] {
  return value.split(',').map((entry) => {
    const parts = entry.trim().split(':');
    if (parts.length < 2 || parts.length > 3 || !parts.every((p) => /^\d{1,9}$/.test(p)))
      throw new InvalidArgumentError(`"${entry}" is not day:daily_limit or day:daily_limit:hourly_limit`);
    const [day, daily, hourly] = parts.map(Number) as [number, number, number | undefined];
    if (day < 1 || daily < 1 || (hourly !== undefined && hourly < 1))
      throw new InvalidArgumentError(`"${entry}": days and limits start at 1`);
    return { day, daily_limit: daily, hourly_limit: hourly ?? null };
  });
}

function parseRate(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1)
    throw new InvalidArgumentError('a fraction from 0 to 1, e.g. 0.05');
  return n;
}

function statusText(r: AddressListing): string {
  const configured = r.configured ? '' : ' (not configured)';
  if (r.status === 'shared') return `shared${configured}`;
  const name = r.tenant_name ? ` (${r.tenant_name})` : ' (no such tenant)';
  const by = r.dedicated_by === 'config' ? ' [POSTYARD_SOURCE_ADDRESSES]' : '';
  return `dedicated to ${r.tenant_id}${name}${by}${configured}`;
}

function warmupText(r: AddressListing): string {
  const ignored = r.ignored_policies ? `; ${r.ignored_policies} tenant policy(ies) ignored` : '';
  if (r.warmup === null) return `none${ignored}`;
  const whose = r.warmup === 'tenant' ? "tenant's policy" : 'operator';
  return `${whose}, day ${r.warmup_day}, ${r.sent_today} sent today${ignored}`;
}

function poolsText(r: AddressListing): string {
  return r.skipped_in_pools ? `${r.pools} (${r.skipped_in_pools} of other tenants: skipped)` : String(r.pools);
}

function changedText(r: AddressListing): string {
  const lines = [`${r.address}: ${statusText(r)}`, `warmup: ${warmupText(r)}`];
  if (r.skipped_in_pools)
    lines.push(
      `${r.skipped_in_pools} pool(s) of other tenants hold it: their mail skips it (flagged dedicated_to_another_tenant)`,
    );
  return lines.join('\n');
}
