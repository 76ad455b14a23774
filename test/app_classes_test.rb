# frozen_string_literal: true

require_relative "test_helper"

# App classes may redefine any method for their own purposes: `extend
# Enumerable` (include? calls each), a Railtie-like respond_to?, a name or
# superclass of their own, values that are BasicObjects. SolidJobs asks its
# questions about classes it did not define through the core methods
# (SolidJobs::Reflection), so none of that changes what it sees or raises
# inside it. Issue 11, failure 1: a worker crashed at start on such a class.
class AppClassesTest < SolidJobsTest
  # What RubyGems' resolver log looks like to Module#include?.
  class EnumerableLog
    extend Enumerable

    def each(&) = [].each(&)
  end

  # A class that answers nothing about itself.
  class Touchy
    class << self
      %i[respond_to? is_a? kind_of? instance_of? include? == equal? name to_s superclass singleton_class?
         method_defined? instance_variables instance_variable_get ancestors <].each do |m|
        define_method(m) { |*| raise "#{m} was called on an app class" }
      end
    end
  end

  class TouchyTask < Touchy
    include SolidJobs::Task
    task_options execution: :thread, channel: "touchy"

    def execute_task(path) = Ledger.append(path, "touchy")
  end

  class TouchyChildTask < TouchyTask; end

  class RenamedTask
    include SolidJobs::Task

    def self.name = "NotMyName"
    def execute_task; end
  end

  class BasicHolder
    include SolidJobs::Task

    @held = BasicObject.new
    @lock = Mutex.new
  end

  class Around
    def self.method_defined?(*) = raise "method_defined? was called on an app class"

    def around(_) = yield
  end

  def test_task_classes_are_found_without_asking_the_other_classes
    assert_raises(NoMethodError) { EnumerableLog.include?(SolidJobs::Task) } # the trap is armed
    names = SolidJobs::Lanes.thread_task_names
    assert_includes names, "AppClassesTest::TouchyTask"
    assert_includes names, "AppClassesTest::TouchyChildTask", "a subclass is found though Task.included never ran for it"
    refute_includes names, "AppClassesTest::RenamedTask"
  end

  def test_options_and_resolution_ignore_what_the_superclass_redefines
    assert_equal "touchy", TouchyChildTask.solid_jobs_options[:channel], "inherited through a Touchy superclass"
    assert_equal "default", RenamedTask.solid_jobs_options[:channel]
    assert_equal [TouchyChildTask, nil, false], SolidJobs::Executor.resolve("AppClassesTest::TouchyChildTask")
    klass, reason = SolidJobs::Executor.resolve("AppClassesTest::EnumerableLog")
    assert_nil klass
    assert_match(/is not a SolidJobs::Task/, reason)
  end

  def test_the_envelope_names_the_class_by_its_constant_not_its_name_method
    envelope = SolidJobs.testing!(:capture) do
      RenamedTask.enqueue
      TouchyChildTask.enqueue("/dev/null")
      SolidJobs::Testing.captured
    end
    assert_equal %w[AppClassesTest::RenamedTask AppClassesTest::TouchyChildTask], envelope.map { |e| e["task"] }
    assert_equal "touchy", envelope.last["channel"]
  end

  def test_a_touchy_task_runs_in_a_worker
    path = ledger_path
    TouchyChildTask.enqueue(path)
    configure_solid_jobs(channels: ["touchy"], thread_concurrency: 1)
    start_conductor
    eventually("the touchy task ran") { ledger_lines == ["touchy"] }
  end

  def test_warm_pool_rule_reads_class_state_through_core_methods
    assert SolidJobs::WarmPool.holds_thread_state?(BasicHolder), "a Mutex is found beside a BasicObject"
    refute SolidJobs::WarmPool.holds_thread_state?(TouchyTask)
  end

  def test_interceptors_are_checked_through_core_methods
    chain = SolidJobs::InterceptorChain.new
    chain.use(Around)
    assert_equal [Around], chain.classes
    error = assert_raises(SolidJobs::ConfigurationError) { chain.use(Touchy) }
    assert_match(/interceptor AppClassesTest::Touchy must be a class/, error.message)
  end
end
