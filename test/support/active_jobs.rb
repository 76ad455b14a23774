# frozen_string_literal: true

# Active Job jobs used by the adapter tests, in-process and by spawned
# `solid-jobs` processes (test/support/active_job_app.rb). They write to a
# ledger file named in their arguments, like the SolidJobs test tasks.
#
# As a worker's --require file loads it: SolidJobs first (the CLI), Active
# Job after, and the adapter named, never required by path.
require "logger"
require "active_job"

ActiveJob::Base.queue_adapter = :solid_jobs
ActiveJob::Base.logger = Logger.new(nil)

class LedgerJob < ActiveJob::Base
  def perform(path, label)
    Ledger.append(path, "#{label} #{Ledger.worker_name} #{Process.pid}")
  end
end

class MailerLedgerJob < LedgerJob
  queue_as :mailers
end

# Fails its first `failures` executions; retry_on allows three in all.
class FlakyJob < ActiveJob::Base
  class Flake < StandardError; end
  retry_on Flake, wait: 0, attempts: 3

  def perform(path, label, failures)
    Ledger.append(path, "attempt #{label} #{executions}")
    raise Flake, "flaky #{label}" if executions <= failures

    Ledger.append(path, "done #{label}")
  end
end

class DiscardedJob < ActiveJob::Base
  class Gone < StandardError; end
  discard_on Gone

  def perform(path, label)
    Ledger.append(path, "attempt #{label}")
    raise Gone, "the record is gone"
  end
end

# Records the provider_job_id it sees, then runs until the adapter says
# the worker is stopping (as a Rails 8.1 continuation asks between steps),
# at most 30 s.
class StoppableJob < ActiveJob::Base
  def perform(path, label)
    adapter = self.class.queue_adapter
    Ledger.append(path, "started #{label} #{provider_job_id} #{adapter.stopping?}")
    # The test's TERM ends the wait.
    Poll.wait(30, every: 0.02) { adapter.stopping? }
    Ledger.append(path, "stopping #{label} #{adapter.stopping?}")
  end
end

# No retry_on: the exception escapes Active Job.
class BrokenJob < ActiveJob::Base
  def perform(path, label)
    Ledger.append(path, "attempt #{label}")
    raise ArgumentError, "broken #{label}"
  end
end
