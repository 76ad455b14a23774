# frozen_string_literal: true

module SolidJobs
  # Include in a class to make it a task:
  #
  #   class RecalculateAccount
  #     include SolidJobs::Task
  #     task_options channel: "critical", max_failures: 10
  #     def execute_task(account_id) = Account.find(account_id).recalculate!
  #   end
  #
  # Worker Ractors read the options, so they are stored frozen and shareable.
  module Task
    def self.included(base)
      base.extend(ClassMethods)
      register(base)
    end

    # The classes that included Task, so a node finds its task classes
    # without scanning ObjectSpace and calling methods on every class there
    # (any of which may redefine them). Written and read in the main Ractor
    # only (Lanes reads it when a node starts): a class defined inside a
    # worker Ractor is not recorded. Held weakly, so a class replaced by a
    # code reload is not kept alive by it.
    def self.register(base)
      return unless Ractor.current == Ractor.main

      (@registry ||= ObjectSpace::WeakMap.new)[base] = true
    end

    # Every task class loaded in this process: the registered ones and all
    # their subclasses (which inherit Task without calling `included`).
    # Main Ractor only.
    def self.classes
      found = {}.compare_by_identity # never calls the classes' own hash or eql?
      pending = @registry ? @registry.keys.select { |k| Class === k } : []
      until pending.empty?
        klass = pending.shift
        next if found.key?(klass)

        found[klass] = true
        pending.concat(Reflection.subclasses(klass))
      end
      found.keys
    end

    # Freezes a DSL block into a Ractor-shareable proc at class-definition
    # time, so a block that captures mutable state fails here, with advice,
    # instead of inside a worker.
    def self.shareable_block(name, block)
      raise ArgumentError, "#{name} needs a block" unless block

      reason = Shareable.obstacle(block, "the #{name} block")
      return Ractor.make_shareable(block) unless reason

      raise ConfigurationError, "the #{name} block must be Ractor-shareable because it runs inside worker Ractors " \
                                "(#{reason}); do not capture local variables holding mutable objects, " \
                                "use frozen constants instead"
    end

    module ClassMethods
      def task_options(**options)
        own = Configuration.validate_task_options(options)
        merged = (instance_variable_defined?(:@solid_jobs_task_options) ? @solid_jobs_task_options : {}).merge(own)
        @solid_jobs_task_options = Ractor.make_shareable(merged)
      end

      # Options in effect: configured defaults, then superclasses, then own.
      def solid_jobs_options
        parent = Reflection.superclass(self)
        inherited = ClassMethods === parent ? parent.solid_jobs_options : SolidJobs.config.default_task_options
        own = instance_variable_defined?(:@solid_jobs_task_options) ? @solid_jobs_task_options : nil
        own ? inherited.merge(own) : inherited
      end

      def solid_jobs_task? = true

      # Decides the delay before the next attempt, per failure:
      #
      #   retry_delay do |failure_count, error, envelope|
      #     :drop if error.is_a?(InvalidCatalog)
      #   end
      #
      # Return seconds (Integer/Float), :drop (discard, no archive), :archive
      # (archive now) or nil (default policy). Runs inside worker Ractors, so
      # the block is made shareable here and may not capture mutable state.
      def retry_delay(&block)
        @solid_jobs_retry_delay = Task.shareable_block(:retry_delay, block)
      end

      # Runs once when a job is finally given up: `|envelope, error|`.
      def after_final_failure(&block)
        @solid_jobs_after_final_failure = Task.shareable_block(:after_final_failure, block)
      end

      # The block registered by `name` here or in a superclass, or nil.
      def solid_jobs_hook(name)
        ivar = :"@solid_jobs_#{name}"
        return instance_variable_get(ivar) if instance_variable_defined?(ivar)

        parent = Reflection.superclass(self)
        ClassMethods === parent ? parent.solid_jobs_hook(name) : nil
      end

      # Enqueues one job; returns its id.
      def enqueue(*arguments)
        WarmPool.publish(self, [arguments]).first
      end

      # Enqueues one job to run after `seconds`; returns its id.
      def enqueue_after(seconds, *arguments)
        unless seconds.is_a?(Numeric) && seconds.finite? && seconds >= 0
          raise ArgumentError, "enqueue_after needs a delay in seconds >= 0 (got #{seconds.inspect})"
        end

        WarmPool.publish(self, [arguments], due_ms: Clock.now_ms + (seconds * 1000).round).first
      end

      # Enqueues one job to run at `time` (a Time, or epoch seconds).
      def schedule_at(time, *arguments)
        epoch = case time
                when Time then time.to_f
                when Numeric then time
                else time.respond_to?(:to_time) ? time.to_time.to_f : time
                end
        unless epoch.is_a?(Numeric) && epoch.finite?
          raise ArgumentError, "schedule_at needs a Time or epoch seconds (got #{time.inspect})"
        end

        WarmPool.publish(self, [arguments], due_ms: (epoch * 1000).round).first
      end

      # Enqueues many jobs in one round trip: `enqueue_many([[1], [2]])`.
      # Every argument list is validated before anything is written.
      def enqueue_many(argument_lists)
        unless argument_lists.is_a?(Array) && argument_lists.all?(Array)
          raise ArgumentError, "enqueue_many takes an Array of argument Arrays, e.g. [[1], [2]]"
        end

        WarmPool.publish(self, argument_lists)
      end
    end
  end
end
