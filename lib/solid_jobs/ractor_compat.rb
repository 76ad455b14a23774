# frozen_string_literal: true

module SolidJobs
  # The one place that touches Ractor APIs that differ across Ruby versions.
  # Ruby 3.1-3.4 join a Ractor with #take; Ruby 3.5+/4.0 removed #take and
  # Ractor.yield in favour of #join/#value and ports. Workers never use
  # Ractor messaging for jobs (native channels do that), so joining is all.
  module RactorCompat
    module_function

    def join(ractor)
      ractor.respond_to?(:value) ? ractor.value : ractor.take
    end

    def spawn(*args, name:, &block)
      Ractor.new(*args, name: name, &block)
    end

    # The current Ractor's number (1 for the main Ractor). Ruby 3.1 has no
    # Ractor#id; its inspect output ("#<Ractor:#2 ...>") carries the number.
    def current_id
      Ractor.current.inspect[/#(\d+)/, 1].to_i
    end
  end
end
